#!/usr/bin/python3
"""tls.mode intercept: every request inside a client's TLS connection is gated as its own
request. The proxy's CA comes from --gen-ca; the TLS test origin's certificate is trusted
through tls.upstream_ca_file.
- curl and Python requests trust the proxy's CA and get the origin's answers, each with
  Proxy-Status queue-wait (a tunnel would pass the origin's response untouched);
- the certificate the client sees names the origin's host and is issued by the CA;
- concurrency 2: four keep-alive TLS connections sending 10 slow requests each: the
  origin sees at most 2 at once, and exactly 2 at some point;
- the rate holds per request on one keep-alive TLS connection (not once per tunnel);
- a 200 KB upload arrives intact (sha256 at the origin);
- a request naming another host inside the connection gets 421; Connection: close ends
  with the proxy's close_notify (the client can tell the end from a cut); a TLS client whose SNI
  names another host than its CONNECT is refused;
- 50 concurrent first connections to a new name mint one leaf (tls_leaf_certificates_total);
- a host in intercept_exclude is tunneled (the client sees the origin's own certificate);
  a reload applies tls.intercept_exclude, and keeps tls.mode until a restart
  (origins the proxy cannot verify: test_origin_certificates.py);
- afterwards every host's in_flight and waiting are 0."""
import hashlib
import os
import signal
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


HOST = "tls.test"


def tls_through_proxy(proxy, host, port, cafile, timeout=10):
    """CONNECT, then TLS over it; returns (ssl socket, the peer certificate as a dict)."""
    ctx = ssl.create_default_context(cafile=cafile)
    ts = ctx.wrap_socket(H.connect_tunnel(proxy, host, port, timeout), server_hostname=host)
    return ts, ts.getpeercert()


def test(t):
    ca_cert, ca_key = t.gen_ca()
    # The origin's own certificate (self-signed: tls.upstream_ca_file trusts it) names
    # every host the test sends to it.
    t._cert = H.make_cert(t.workdir, HOST, extra_names=("paced.test", "excluded.test"))
    origin = t.origin(tls=True)
    origin_cert, _ = t.cert()
    base = "https://%s:%d" % (HOST, origin.port)

    cfg = H.base_config(tls_port=origin.port, concurrency=2, rate=1000, burst=1000)
    cfg["hosts"] = {"paced.test": {"rate": 10, "burst": 1}}
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert,
                  "intercept_exclude": ["excluded.test"]}
    proxy = t.proxy(cfg)

    # curl, as a crawler would run it: it offers h2 and http/1.1 by ALPN and gets h2
    # (tls.alpn's first); with --http1.1 it offers only http/1.1.
    for flags, version in (([], "HTTP/2"), (["--http1.1"], "HTTP/1.1")):
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", ca_cert, "-x",
                            "http://127.0.0.1:%d" % proxy.port, "-D", "-", "-o", "/dev/null"] + flags
                           + [base + "/curl"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
        H.check(r.returncode == 0, "curl %s through interception failed: %s" % (flags, r.stderr))
        heads = [h for h in r.stdout.replace("\r\n", "\n").split("\n\n") if h.strip()]
        H.check(len(heads) == 2 and heads[0].startswith("HTTP/1.1 200") and heads[1].startswith(version + " 200"),
                "curl %s got %r" % (flags, heads))
        H.check("proxy-status: politeproxy; queue-wait=" in heads[1].lower(), "no Proxy-Status queue-wait on the "
                "response: the request was not gated\n" + heads[1])
        H.log("curl --cacert %s through interception: %s; %s"
              % (" ".join(flags), heads[0].splitlines()[0], heads[1].splitlines()[0]))

    # the certificate the client sees
    ts, cert = tls_through_proxy(proxy, HOST, origin.port, ca_cert)
    ts.close()
    issuer = dict(x[0] for x in cert["issuer"])
    sans = [v for k, v in cert.get("subjectAltName", ()) if k == "DNS"]
    H.check(issuer.get("commonName", "").startswith("politeproxy CA on"), "issuer %r" % issuer)
    H.check(sans == [HOST], "subjectAltName %r" % sans)

    # Connection: close inside TLS ends with the proxy's close_notify, not a cut
    strict = ssl.create_default_context(cafile=ca_cert)
    strict.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF  # Python sets it: a cut would read as a clean end
    ts = strict.wrap_socket(H.connect_tunnel(proxy, HOST, origin.port), server_hostname=HOST,
                            suppress_ragged_eofs=False)
    ts.sendall(("GET /close HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (HOST, origin.port)).encode())
    answer = b""
    try:
        while True:
            chunk = ts.recv(65536)
            if not chunk:
                break
            answer += chunk
    except ssl.SSLError as e:  # UNEXPECTED_EOF_WHILE_READING
        raise H.TestFailure("the proxy cut the TLS connection without close_notify after %r: %s" % (answer[:40], e))
    ts.close()
    H.check(answer.startswith(b"HTTP/1.1 200"), "Connection: close inside TLS: %r" % answer[:80])
    H.log("Connection: close inside TLS: the response, then close_notify")

    # a client whose SNI names another host than its CONNECT's gets no leaf for it
    refused = None
    s = H.connect_tunnel(proxy, HOST, origin.port)
    try:
        ssl.create_default_context(cafile=ca_cert).wrap_socket(s, server_hostname="bank.test").close()
    except (ssl.SSLError, ConnectionResetError) as e:
        refused = e
    s.close()
    H.check(refused is not None, "a handshake with SNI bank.test inside CONNECT tls.test succeeded")
    H.log("SNI naming another host than the CONNECT: refused (%s)" % refused)

    # concurrency: 4 keep-alive TLS connections x 10 slow requests
    origin.reset()
    results, errors = [], []

    def client(i):
        s = H.https_session(proxy, ca_cert)
        try:
            for j in range(10):
                resp = s.get(base + "/slow?delay=0.1&c=%d&j=%d" % (i, j), timeout=30)
                results.append((resp.status_code, resp.headers.get("Proxy-Status", "")))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        finally:
            s.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    H.check(not errors, "requests through interception failed: %s" % errors[:3])
    H.check(len(results) == 40 and all(s == 200 for s, _ in results), "statuses %r" % [s for s, _ in results])
    H.check(all("queue-wait=" in p for _, p in results), "a response without Proxy-Status queue-wait")
    stats = origin.host(HOST)
    H.check(stats["count"] == 40, "the origin saw %d requests, not 40" % stats["count"])
    H.check(stats["peak"] == 2, "the origin saw %d requests at once; the bound is 2" % stats["peak"])
    H.log("4 keep-alive TLS connections x 10 requests: origin peak %d (bound 2), %d requests"
          % (stats["peak"], stats["count"]))

    # the rate, per request, on one keep-alive connection
    s = H.https_session(proxy, ca_cert)
    paced = "https://paced.test:%d" % origin.port
    for j in range(6):
        resp = s.get(paced + "/p%d" % j, timeout=10)
        H.check(resp.status_code == 200, "paced request %d: %d" % (j, resp.status_code))
    arrivals = origin.host("paced.test")["arrivals"]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    H.check(len(arrivals) == 6 and min(gaps) >= 0.08, "rate 10/s over one TLS connection: gaps %r" % gaps)
    H.log("rate 10/s on one keep-alive TLS connection: smallest gap %.3f s" % min(gaps))

    # a 200 KB upload
    body = os.urandom(200 * 1024)
    resp = s.post(base + "/upload", data=body, timeout=20)
    H.check(resp.status_code == 200 and resp.json().get("sha256") == hashlib.sha256(body).hexdigest(),
            "upload: %d %r" % (resp.status_code, resp.text[:200]))
    s.close()
    H.log("200 KB upload arrived intact")

    # another host inside the connection: 421
    ts, _ = tls_through_proxy(proxy, HOST, origin.port, ca_cert)
    ts.sendall(("GET /x HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % origin.port).encode())
    answer = ts.recv(4096)
    ts.close()
    H.check(answer.startswith(b"HTTP/1.1 421"), "a request for another host: %r" % answer[:80])

    # excluded: tunneled, the origin's own certificate
    ts, cert = tls_through_proxy(proxy, "excluded.test", origin.port, origin_cert)
    ts.close()
    H.check(dict(x[0] for x in cert["issuer"]).get("commonName") == "tls.test", "excluded host intercepted")
    m = proxy.metrics()
    H.check(H.msum(m, "politeproxy_connect_total", mode="tunneled") >= 1, "the exclusion was not counted")
    H.check(H.msum(m, "politeproxy_connect_total", mode="intercepted") >= 5, "interceptions not counted")

    # 50 first connections to a new name at once: one leaf is minted for them
    minted_before = H.msum(proxy.metrics(), "politeproxy_tls_leaf_certificates_total", result="minted")
    handshakes, failures = [], []

    def handshake():
        try:
            ts, c = tls_through_proxy(proxy, "fresh.test", origin.port, ca_cert)
            handshakes.append(c["serialNumber"])
            ts.close()
        except Exception as e:  # noqa: BLE001
            failures.append(repr(e))

    threads = [threading.Thread(target=handshake) for _ in range(50)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    minted = H.msum(proxy.metrics(), "politeproxy_tls_leaf_certificates_total", result="minted") - minted_before
    H.check(not failures and len(handshakes) == 50, "concurrent handshakes failed: %s" % failures[:3])
    H.check(minted == 1 and len(set(handshakes)) == 1, "50 concurrent first connections minted %d leaves (%d "
            "serials)" % (minted, len(set(handshakes))))
    H.log("50 concurrent first connections to fresh.test: %d leaf minted" % minted)

    # a reload applies tls.intercept_exclude at once; the other tls keys (here the mode)
    # keep their running values until a restart, with a warning
    reloaded = dict(cfg, tls=dict(cfg["tls"], mode="tunnel", intercept_exclude=["excluded.test", "paced.test"]))
    with open(proxy.config_path, "w") as f:
        f.write(H.dump_config(reloaded))
    os.kill(proxy.pid, signal.SIGHUP)
    H.check(H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_config_reloads_total", 0,
                                        result="success") >= 1, 3), "the reload was not applied")
    ts, cert = tls_through_proxy(proxy, "paced.test", origin.port, origin_cert)
    ts.close()
    H.check(dict(x[0] for x in cert["issuer"]).get("commonName") == "tls.test",
            "a host added to intercept_exclude by a reload is still intercepted")
    ts, cert = tls_through_proxy(proxy, HOST, origin.port, ca_cert)
    ts.close()
    H.check(dict(x[0] for x in cert["issuer"]).get("commonName", "").startswith("politeproxy CA on"),
            "tls.mode changed by a reload, not at a restart")
    H.log("reload: intercept_exclude applied, tls.mode kept until a restart")

    H.check(H.wait_until(lambda: all(v == 0 for v in (
        H.msum(proxy.metrics(), "politeproxy_host_in_flight"), H.msum(proxy.metrics(), "politeproxy_host_waiting"))),
        5), "in_flight/waiting did not return to 0")


if __name__ == "__main__":
    H.main(test, timeout=90)
