#!/usr/bin/python3
"""Real clients through the proxy: curl -x (plain HTTP and HTTPS through a CONNECT
tunnel to a TLS origin), Python requests with proxies=, and a 200 KB random POST body
that arrives intact with Content-Length and with chunked transfer encoding."""
import hashlib
import json
import os
import subprocess
import sys
import warnings

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "clients.test"
TLS_HOST = "tls.test"


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env["HOME"] = env.get("HOME", "/tmp")
    return env


def curl(args, timeout=15):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "-q"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(),
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")


def split_head(raw):
    """curl -i output -> (status of the last response, headers dict, body)."""
    blocks = raw.split(b"\r\n\r\n")
    # skip 1xx / CONNECT 200 blocks: the last header block before the body
    i = 0
    while i + 1 < len(blocks) and blocks[i + 1].startswith(b"HTTP/"):
        i += 1
    head = blocks[i].decode("latin-1").split("\r\n")
    body = b"\r\n\r\n".join(blocks[i + 1:])
    status = int(head[0].split()[1])
    hdrs = {}
    for l in head[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def test(t):
    origin = t.origin()
    tls_origin = t.origin(tls=True)
    proxy = t.proxy(H.base_config(tls_port=tls_origin.port, concurrency=4, rate=100,
                                  burst=100))
    purl = proxy.url

    # curl, plain HTTP
    url = "http://%s:%d/curl?size=1000" % (HOST, origin.port)
    rc, out, err = curl(["-i", "-x", purl, url])
    H.check(rc == 0, "curl -x %s %s failed (exit %d): %s" % (purl, url, rc, err))
    status, hdrs, body = split_head(out)
    H.check(status == 200 and len(body) == 1000,
            "curl through the proxy: status %d, %d body bytes (expected 200, 1000)"
            % (status, len(body)))
    H.check("politeproxy" in hdrs.get("proxy-status", "") and
            "queue-wait=" in hdrs.get("proxy-status", ""),
            "origin response via curl lacks 'Proxy-Status: politeproxy; queue-wait=':"
            " %r" % hdrs)

    # curl, HTTPS through CONNECT
    turl = "https://%s:%d/tunnel?size=5" % (TLS_HOST, tls_origin.port)
    rc, out, err = curl(["-k", "-x", purl, turl])
    H.check(rc == 0 and out == b"01234",
            "curl -x %s -k %s: exit %d, body %r, stderr %s" % (purl, turl, rc, out[:200], err))
    H.check(tls_origin.host(TLS_HOST)["count"] == 1,
            "TLS origin did not see the tunnelled request: %r" % tls_origin.stats())

    # python requests, plain HTTP and HTTPS (CONNECT)
    s = requests.Session()
    s.trust_env = False
    r = s.get("http://%s:%d/requests?size=300" % (HOST, origin.port),
              proxies={"http": purl}, timeout=10)
    H.check(r.status_code == 200 and len(r.content) == 300,
            "requests via proxies=: status %d, %d bytes" % (r.status_code, len(r.content)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = s.get("https://%s:%d/requests-tls?size=7" % (TLS_HOST, tls_origin.port),
                  proxies={"https": purl}, verify=False, timeout=10)
    H.check(r.status_code == 200 and r.content == b"0123456",
            "requests https via proxies= (CONNECT): status %d, body %r"
            % (r.status_code, r.content[:100]))

    # 200 KB random POST body: Content-Length and chunked
    data = os.urandom(200 * 1024)
    digest = hashlib.sha256(data).hexdigest()
    post_url = "http://%s:%d/upload" % (HOST, origin.port)

    def check_upload(res_json, how):
        H.check(res_json.get("length") == len(data) and res_json.get("sha256") == digest,
                "%s: origin received %s bytes sha256 %s, sent %d bytes sha256 %s"
                % (how, res_json.get("length"), res_json.get("sha256"), len(data), digest))

    r = H.request(proxy, post_url + "?cl", method="POST", body=data,
                  headers={"Content-Type": "application/octet-stream"}, timeout=15)
    H.check(r.error is None and r.status == 200, "POST with Content-Length: %r" % r)
    check_upload(r.json(), "POST with Content-Length")

    def pieces():
        for i in range(0, len(data), 16384):
            yield data[i:i + 16384]
    r = H.request(proxy, post_url + "?chunked", method="POST", body=pieces(),
                  headers={"Transfer-Encoding": "chunked"}, encode_chunked=True, timeout=15)
    H.check(r.error is None and r.status == 200, "POST chunked: %r" % r)
    check_upload(r.json(), "POST chunked")

    path = os.path.join(t.workdir, "body.bin")
    with open(path, "wb") as f:
        f.write(data)
    rc, out, err = curl(["-x", purl, "--data-binary", "@" + path,
                         "-H", "Content-Type: application/octet-stream", post_url + "?curl"])
    H.check(rc == 0, "curl POST through the proxy failed (exit %d): %s" % (rc, err))
    check_upload(json.loads(out), "curl POST (Content-Length)")
    rc, out, err = curl(["-x", purl, "--data-binary", "@" + path,
                         "-H", "Transfer-Encoding: chunked",
                         "-H", "Content-Type: application/octet-stream",
                         post_url + "?curl-chunked"])
    H.check(rc == 0, "curl chunked POST through the proxy failed (exit %d): %s" % (rc, err))
    check_upload(json.loads(out), "curl POST (chunked)")

    r = s.post(post_url + "?requests", data=data, proxies={"http": purl}, timeout=15)
    H.check(r.status_code == 200, "requests POST: status %d" % r.status_code)
    check_upload(r.json(), "requests POST")


if __name__ == "__main__":
    H.main(test, timeout=45)
