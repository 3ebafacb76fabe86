#!/usr/bin/python3
"""Parent proxies (SPEC.md `parents`, `routes`), through a real Squid 5.7 (basic auth by
its basic_ncsa_auth helper) and a real tinyproxy 1.11, both on loopback:
- plain HTTP through each: the origin sees the request exactly once, with the parent's
  Via after the proxy's own, without the client's Proxy-Authorization (the client
  authenticates to politeproxy, security.users_file); Squid's log names the parent's user
  (the credentials politeproxy sent it); the answer's Proxy-Status has next-hop="NAME";
- HTTPS, tls.mode intercept, through each (curl with the proxy's CA): CONNECT through the
  parent (in its log), the proxy's own TLS to the origin inside, verified against the
  origin's name; the answer is gated (queue-wait) and names its next hop;
- HTTPS, tls.mode tunnel, through each: the client's tunnel spliced to the parent's (the
  origin's own certificate reaches the client), the 200 naming the next hop;
- a route to `direct` next to the parent routes; /hosts shows each host's way;
  parent_up, parent_connections, parent_requests_total, parent_connect_seconds.
Squid resolves the test's names from a hosts file of its own; tinyproxy through the
system's resolver, so its destination is "localhost"."""
import base64
import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import parent_proxies  # noqa: E402

CLIENT = ("crawler", "client-secret")


def users_file(t):
    path = os.path.join(t.workdir, "users.htpasswd")
    digest = base64.b64encode(hashlib.sha1(CLIENT[1].encode()).digest()).decode()
    with open(path, "w") as f:
        f.write("%s:{SHA}%s\n" % (CLIENT[0], digest))
    return path


def client_auth():
    return {"Proxy-Authorization": "Basic " + base64.b64encode(("%s:%s" % CLIENT).encode()).decode()}


def proxy_status(r):
    return r.header("Proxy-Status") or ""


def curl(proxy, url, cafile, *extra):
    r = subprocess.run(["curl", "-sS", "--max-time", "15", "--cacert", cafile, "-x", "http://127.0.0.1:%d" % proxy.port,
                        "--proxy-user", "%s:%s" % CLIENT, "-D", "-", "-o", "-"] + list(extra) + [url],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    H.check(r.returncode == 0, "curl %s: %s" % (url, r.stderr))
    return r.stdout.replace("\r\n", "\n")


def test(t):
    for kind in ("squid", "tinyproxy"):
        parent_proxies.require(kind)
    ca_cert, ca_key = t.gen_ca()
    t._cert = H.make_cert(t.workdir, "tls.test", extra_names=("localhost",))
    origin = t.origin()
    tls_origin = t.origin(tls=True)
    origin_cert, _ = t.cert()
    squid = t.parent("squid", user="pp", password="parent-secret",
                     names={"api.test": "127.0.0.1", "tls.test": "127.0.0.1", "misnamed.test": "127.0.0.1"})
    tiny = t.parent("tinyproxy")

    cfg = H.base_config(tls_port=tls_origin.port, concurrency=4, rate=1000, burst=1000)
    cfg["security"]["users_file"] = users_file(t)
    cfg["security"]["allow_destinations"] = ["127.0.0.0/8", "::1/128"]  # localhost is both
    cfg["security"]["connect_ports"].append(origin.port)
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    cfg["parents"] = {"sq": {"url": squid.url, "fail_after": 1}, "tiny": {"url": tiny.url}}
    cfg["routes"] = [{"match": ["api.test", "tls.test", "misnamed.test"], "via": ["sq"]},
                     {"match": ["localhost"], "via": ["tiny"]},
                     {"match": ["*.test"], "via": ["direct"]}]
    proxy = t.proxy(cfg, name="intercept")

    # Plain HTTP through each parent.
    for host, parent, via_name in (("api.test", "sq", "squid"), ("localhost", "tiny", "tinyproxy")):
        r = H.request(proxy, "http://%s:%d/plain-%s" % (host, origin.port, parent), headers=client_auth())
        H.check(r.status == 200, "plain HTTP through %s: %s %s" % (parent, r.status, r.body[:200]))
        H.check('next-hop="%s"' % parent in proxy_status(r), "no next-hop=%s: %r" % (parent, proxy_status(r)))
        seen = json.loads(r.body)
        names = [k.lower() for k, _ in seen["headers"]]
        via = ", ".join(v for k, v in seen["headers"] if k.lower() == "via")
        H.check("proxy-authorization" not in names, "the origin saw a Proxy-Authorization through %s: %s" % (parent, seen))
        H.check(via.startswith("1.1 politeproxy-") and via_name in via.split(",")[-1],
                "the origin's Via through %s: %r (politeproxy's, then the parent's)" % (parent, via))
        H.check(origin.host(host)["count"] == 1, "%s: the origin saw %d requests, sent 1" % (host, origin.host(host)["count"]))
        H.log("plain HTTP through %s: 200, Via %r" % (parent, via))
    logged = [line for line in squid.requests() if line[5] == "GET"]
    H.check(any(line[6].endswith("/plain-sq") and line[7] == "pp" for line in logged),
            "Squid's log has no GET /plain-sq by user pp (the parent's credentials): %s" % logged)

    # A route to direct next to the parent routes.
    r = H.request(proxy, "http://other.test:%d/direct" % origin.port, headers=client_auth())
    H.check(r.status == 200 and "next-hop" not in proxy_status(r), "direct route: %s %r" % (r.status, proxy_status(r)))
    H.check(not any(line[6].endswith("/direct") for line in squid.requests()), "a direct request went through Squid")

    # HTTPS, intercepted, through each parent.
    for host, parent in (("tls.test", "sq"), ("localhost", "tiny")):
        out = curl(proxy, "https://%s:%d/tls-%s" % (host, tls_origin.port, parent), ca_cert, "--http1.1")
        heads = [h for h in out.split("\n\n") if h.startswith("HTTP/")]
        H.check(len(heads) == 2 and heads[1].startswith("HTTP/1.1 200"), "HTTPS through %s: %r" % (parent, out[:400]))
        H.check("queue-wait=" in heads[1] and 'next-hop="%s"' % parent in heads[1],
                "HTTPS through %s: the answer is not gated or names no next hop: %r" % (parent, heads[1]))
        H.check(tls_origin.host(host)["count"] == 1, "%s over TLS: the origin saw %d requests"
                % (host, tls_origin.host(host)["count"]))
        H.log("HTTPS intercepted through %s: %s" % (parent, heads[1].splitlines()[0]))
    with open(os.path.join(tiny.dir, "tinyproxy.log")) as f:
        H.check("CONNECT localhost:%d" % tls_origin.port in f.read(), "tinyproxy's log has no CONNECT localhost")

    # Inside the tunnel the TLS is the origin's: a certificate for another name is the
    # destination's failure (502 tls_certificate_error), never the parent's (fail_after 1).
    for i in range(2):
        r = subprocess.run(["curl", "-sS", "--max-time", "15", "--cacert", ca_cert, "-x", "http://127.0.0.1:%d" % proxy.port,
                            "--proxy-user", "%s:%s" % CLIENT, "-D", "-", "-o", "/dev/null", "--http1.1",
                            "https://misnamed.test:%d/m?i=%d" % (tls_origin.port, i)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        H.check("HTTP/1.1 502" in r.stdout and "tls_certificate_error" in r.stdout and 'next-hop="sq"' in r.stdout,
                "a misnamed origin certificate through Squid: %r" % r.stdout[-400:])
    H.check(H.mget(proxy.metrics(), "politeproxy_parent_up", parent="sq") == 1,
            "an origin's certificate failure inside the tunnel marked the parent down")
    H.log("a misnamed origin certificate through Squid: 502 tls_certificate_error, Squid stays up")

    hosts = proxy.hosts()
    H.check(hosts["api.test"]["via"] == ["sq"] and hosts["localhost"]["via"] == ["tiny"]
            and hosts["other.test"]["via"] == ["direct"], "/hosts via: %s"
            % {k: v["via"] for k, v in hosts.items()})
    m = H.metrics_when(proxy, "politeproxy_parent_requests_total", 2, parent="sq", outcome="ok")
    H.check(H.mget(m, "politeproxy_parent_requests_total", parent="sq", outcome="ok") == 2,
            "parent_requests_total{sq,ok}: %s" % H.mseries(m, "politeproxy_parent_requests_total"))
    H.check(H.mget(m, "politeproxy_parent_requests_total", parent="tiny", outcome="ok") == 2, "parent_requests_total{tiny,ok}")
    for parent in ("sq", "tiny"):
        H.check(H.mget(m, "politeproxy_parent_up", parent=parent) == 1, "parent_up{%s}" % parent)
        idle = H.metrics_when(proxy, "politeproxy_parent_connections", 0, parent=parent)
        H.check(H.mget(idle, "politeproxy_parent_connections", parent=parent) == 0, "parent_connections{%s} after the work" % parent)
        H.check((H.mget(m, "politeproxy_parent_connect_seconds_count", parent=parent) or 0) >= 1,
                "parent_connect_seconds{%s} counted no connect" % parent)

    # Squid logs a tunnel when it closes: the proxy's pooled one closes when it stops.
    proxy.stop()
    connected = lambda: [line for line in squid.requests() if line[5] == "CONNECT"]  # noqa: E731
    H.check(any(line[6] == "tls.test:%d" % tls_origin.port and line[7] == "pp" for line in H.wait_until(connected, 10)),
            "Squid's log has no CONNECT tls.test by user pp: %s" % squid.requests())

    # HTTPS, tunneled: the client's tunnel spliced to the parent's.
    tcfg = dict(cfg, tls={"mode": "tunnel"})
    tunnel = t.proxy(tcfg, name="tunnel")
    s = H.connect_tunnel_raw(tunnel, "tls.test", tls_origin.port, headers=client_auth())
    H.check(s[1].startswith(b"HTTP/1.1 200") and b'next-hop="sq"' in s[1], "CONNECT through Squid: %r" % s[1])
    s[0].close()
    out = curl(tunnel, "https://tls.test:%d/tunneled" % tls_origin.port, origin_cert, "--http1.1")
    heads = [h for h in out.split("\n\n") if h.startswith("HTTP/")]
    H.check(len(heads) == 2 and heads[1].startswith("HTTP/1.1 200") and "queue-wait" not in heads[1],
            "a tunnel through Squid: %r" % out[:400])
    H.check(tls_origin.host("tls.test")["count"] == 2, "the tunneled request did not reach the origin")
    H.log("HTTPS tunneled through Squid: %s" % heads[1].splitlines()[0])
    out = curl(tunnel, "https://localhost:%d/tunneled" % tls_origin.port, origin_cert, "--http1.1")
    heads = [h for h in out.split("\n\n") if h.startswith("HTTP/")]
    H.check(len(heads) == 2 and "next-hop=\"tiny\"" in heads[0] and heads[1].startswith("HTTP/1.1 200"),
            "a tunnel through tinyproxy: %r" % out[:400])
    H.check(tls_origin.host("localhost")["count"] == 2, "the request tunneled through tinyproxy did not reach the origin")
    H.log("HTTPS tunneled through tinyproxy: %s" % heads[1].splitlines()[0])


if __name__ == "__main__":
    H.main(test, timeout=90)
