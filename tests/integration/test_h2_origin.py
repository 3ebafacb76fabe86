#!/usr/bin/python3
"""HTTP/2 towards origins: every request is one stream of the origin's session, gated as
any other request; the origin (python3-h2, h2_origin.py) counts streams in flight as it
sees them.
1. `upstream_protocol: h2c` host, HTTP/1.1 clients: 16 at once at concurrency 2 -> all
   200 with Proxy-Status queue-wait, the origin saw HTTP/2 on at most one connection per
   worker and a peak of exactly 2.
2. The origin's SETTINGS_MAX_CONCURRENT_STREAMS 3 while the host's concurrency is 50: 24
   at once -> all 200, origin peak <= 3 (and 3 is reached), none refused; /hosts and
   host_stream_ceiling show the ceiling 3. A second origin of the same host (another
   port) with max streams 1 holds the host at 1 while its session lives; when that
   session ends (GOAWAY after one request) the host's ceiling is the first origin's 3 again.
3. HTTP/1.1 client <-> h2 origin: uploads of 0, 1 and 200 000 bytes with Content-Length
   and chunked (sha256 at the origin), downloads of 0, 1 and 200 000 bytes with and
   without content-length (sha256 at the client), HEAD; fields cross both ways,
   hop-by-hop ones do not.
4. h2c client <-> h2 origin: the same bodies both ways on one client connection.
5. An origin that takes 3 streams per connection (then GOAWAY naming the third: the
   streams above it are unprocessed), 12 streams on one client connection at concurrency
   5 -> all 200: the unprocessed ones went again on a new session.
6. `upstream_protocol: auto` through interception to a TLS origin that picks h2 by ALPN:
   curl --http2 and httpx (http2=True) get HTTP/2 from the proxy, the origin saw HTTP/2,
   16 concurrent httpx requests on one connection -> origin peak exactly 2.
7. An origin that answers 413 and resets the stream before reading a 200 000-byte upload:
   the HTTP/1.1 client gets the 413; unread body bytes are never taken for a request.
8. An h2 client resets a stream whose origin request is in flight: the origin's stream is
   reset and the slot comes back at once.
9. Trailers from the h2 origin reach an HTTP/1.1 client in the chunked trailer section
   and an h2 client as a trailing HEADERS; an h2 client's request trailers (after a
   100 000-byte body) and an HTTP/1.1 client's chunked trailer section (less a
   Content-Length, which a trailer must not carry) reach the h2 origin.
Afterwards every host's in_flight and waiting are 0."""
import asyncio
import hashlib
import json
import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from h2_origin import H2Origin, pattern  # noqa: E402
from test_h2c import H2Client  # noqa: E402


def sha(b):
    return hashlib.sha256(b).hexdigest()


def raw_exchange(port, data, timeout=5):
    """Sends `data` on a new connection to the proxy; everything it answers until it closes
    (or until `timeout` of silence)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(data)
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        got += chunk
    sock.close()
    return got


def test(t):
    h2c = H2Origin()
    ceiling = H2Origin(max_streams=3)
    restarting = H2Origin(goaway_after=3)
    short_lived = H2Origin(max_streams=1, goaway_after=1)
    cfg = H.base_config(concurrency=2)
    cfg["hosts"] = {
        "h2c.test": {"upstream_protocol": "h2c"},
        "ceiling.test": {"upstream_protocol": "h2c", "concurrency": 50, "adaptive": {"hard_max": 50},
                         "reason": "test: the origin's own stream limit is the bound"},
        "goaway.test": {"upstream_protocol": "h2c", "concurrency": 5, "adaptive": {"hard_max": 5},
                        "reason": "test: more streams than the origin takes per connection"},
    }
    proxy = t.proxy(cfg)

    # 1. per-stream gating towards an h2c origin
    base = "http://h2c.test:%d" % h2c.port
    rs = H.concurrent(proxy, [base + "/delay/150"] * 16)
    H.check(all(r.status == 200 for r in rs), "h2c origin: %r" % [(r.status, r.error) for r in rs])
    H.check(all("queue-wait=" in (r.header("Proxy-Status") or "") for r in rs), "a response without queue-wait")
    st = h2c.stats("h2c.test")
    H.check(st["count"] == 16 and st["peak"] == 2, "h2c origin saw %d requests, peak %d (want 16, 2)"
            % (st["count"], st["peak"]))
    H.check(1 <= st["connections"] <= cfg["workers"], "h2c origin: %d connections for %d workers"
            % (st["connections"], cfg["workers"]))
    H.log("1. HTTP/1.1 clients -> h2c origin: 16 at concurrency 2, origin peak %d on %d connection(s)"
          % (st["peak"], st["connections"]))

    # 2. the origin's SETTINGS_MAX_CONCURRENT_STREAMS is the ceiling
    H.check(H.request(proxy, "http://ceiling.test:%d/" % ceiling.port).status == 200, "first request to ceiling.test")
    rs = H.concurrent(proxy, ["http://ceiling.test:%d/delay/200" % ceiling.port] * 24)
    H.check(all(r.status == 200 for r in rs), "ceiling: %r" % [(r.status, r.error) for r in rs])
    st = ceiling.stats("ceiling.test")
    H.check(st["peak"] == 3, "origin with SETTINGS_MAX_CONCURRENT_STREAMS 3 saw a peak of %d" % st["peak"])
    view = proxy.hosts()["ceiling.test"]
    H.check(view["stream_ceiling"] == 3 and view["limit"] == 3 and view["configured_limit"] == 50 and
            view["upstream_protocol"] == "h2", "/hosts for ceiling.test: %r" % view)
    m = proxy.metrics()
    H.check(H.mget(m, "politeproxy_host_stream_ceiling", host="ceiling.test") == 3, "host_stream_ceiling gauge")
    H.log("2. concurrency 50, origin's max streams 3: 24 at once all 200, origin peak %d, /hosts limit %d ceiling %d"
          % (st["peak"], view["limit"], view["stream_ceiling"]))
    # A second origin of the same host (another port) takes 1 stream and ends its session
    # after one request: its ceiling holds the host while it lives, then goes with it.
    H.check(H.request(proxy, "http://ceiling.test:%d/delay/300" % short_lived.port).status == 200,
            "a request to ceiling.test's second origin")
    lifted = H.wait_until(lambda: proxy.hosts()["ceiling.test"]["stream_ceiling"] == 3, timeout=3)
    view = proxy.hosts()["ceiling.test"]
    H.log("2b. a second origin of ceiling.test (max streams 1) ended its session: /hosts ceiling %s, limit %d"
          % (view["stream_ceiling"], view["limit"]))
    H.check(lifted and view["limit"] == 3, "after the 1-stream origin's session ended, ceiling.test kept ceiling %s "
            "(limit %d); the other origin's 3 should apply" % (view["stream_ceiling"], view["limit"]))

    # 3. HTTP/1.1 client <-> h2 origin, bodies both ways
    for n in (0, 1, 200000):
        body = pattern(n)
        for chunked in (False, True):
            r = H.request(proxy, base + "/echo", method="POST", body=iter([body]) if chunked else body,
                          headers={"Transfer-Encoding": "chunked"} if chunked else None, encode_chunked=chunked)
            H.check(r.status == 200, "upload %d chunked=%s: %r" % (n, chunked, r))
            got = r.json()
            H.check(got["sha256"] == sha(body) and got["length"] == n,
                    "upload %d chunked=%s: origin got %d bytes" % (n, chunked, got["length"]))
        for suffix in ("", "?nolength"):
            r = H.request(proxy, base + "/bytes/%d%s" % (n, suffix))
            H.check(r.status == 200 and sha(r.body) == sha(pattern(n)),
                    "download %d%s: %r, %d bytes" % (n, suffix, r, len(r.body)))
    r = H.request(proxy, base + "/echo", headers={"X-Custom": "yes", "Connection": "X-Hop", "X-Hop": "1",
                                                   "Keep-Alive": "timeout=5"})
    names = [k for k, _ in r.json()["headers"]]
    H.check("x-custom" in names and "x-hop" not in names and "keep-alive" not in names and "via" in names,
            "fields at the h2 origin: %r" % names)
    H.check(r.header("Via") is not None and r.header("Content-Type") == "text/plain", "response fields %r" % r.headers)
    r = H.request(proxy, base + "/bytes/100", method="HEAD")
    H.check(r.status == 200 and r.body == b"", "HEAD: %r" % r)
    H.log("3. HTTP/1.1 client <-> h2 origin: bodies 0/1/200000 both ways (length and chunked) intact; HEAD")

    # 4. h2c client <-> h2 origin
    c = H2Client(proxy.port)
    authority = "h2c.test:%d" % h2c.port
    uploads = {n: c.request(authority, "/echo", method="POST", body=pattern(n)) for n in (0, 1, 200000)}
    downloads = {n: c.request(authority, "/bytes/%d" % n) for n in (0, 1, 200000)}
    H.check(c.pump(c.done(list(uploads.values()) + list(downloads.values())), 30), "h2 client: not every stream ended")
    for n, sid in uploads.items():
        got = json.loads(c.responses[sid]["body"])
        H.check(c.responses[sid]["status"] == 200 and got["sha256"] == sha(pattern(n)),
                "h2 upload %d: %r" % (n, c.responses[sid]["status"]))
    for n, sid in downloads.items():
        H.check(c.responses[sid]["status"] == 200 and c.responses[sid]["body"] == pattern(n),
                "h2 download %d: %d bytes" % (n, len(c.responses[sid]["body"])))
    c.close()
    H.log("4. h2c client <-> h2 origin: bodies 0/1/200000 both ways intact")

    # 5. GOAWAY: unprocessed streams go again on a new session. One h2c client
    #    connection, so its streams share one worker's session to the origin.
    c = H2Client(proxy.port)
    sids = [c.request("goaway.test:%d" % restarting.port, "/delay/50") for _ in range(12)]
    H.check(c.pump(c.done(sids), 30), "behind GOAWAYs: not every stream ended")
    statuses = [c.responses[s]["status"] for s in sids]
    c.close()
    H.check(statuses == [200] * 12, "behind GOAWAYs: %r" % statuses)
    st = restarting.stats("goaway.test")
    H.check(st["count"] == 12 and restarting.refused > 0 and st["connections"] >= 4,
            "the origin served %d on %d connections, left %d unprocessed" % (st["count"], st["connections"],
                                                                             restarting.refused))
    H.log("5. origin taking 3 streams per connection (then GOAWAY): 12/12 answered over %d sessions, %d "
          "unprocessed streams sent again" % (st["connections"], restarting.refused))

    # 6. auto: ALPN h2 through interception
    ca_cert, ca_key = t.gen_ca()
    cert, key = H.make_cert(t.workdir, "alpn.test")
    tls_origin = H2Origin(tls=(cert, key))
    icfg = H.base_config(tls_port=tls_origin.port, concurrency=2)
    icfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": cert}
    iproxy = t.proxy(icfg, name="intercepting")
    url = "https://alpn.test:%d/bytes/1000" % tls_origin.port
    r = subprocess.run(["curl", "-sS", "--http2", "--max-time", "10", "--cacert", ca_cert, "-x",
                        "http://127.0.0.1:%d" % iproxy.port, "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                        url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
    H.check(r.returncode == 0 and r.stdout == "2 200", "curl --http2: %r %s" % (r.stdout, r.stderr))

    import httpx

    async def sixteen():
        async with httpx.AsyncClient(http2=True, proxies="http://127.0.0.1:%d" % iproxy.port, verify=ca_cert,
                                     trust_env=False, timeout=30) as client:
            rs = await asyncio.gather(*(client.get("https://alpn.test:%d/delay/150" % tls_origin.port)
                                        for _ in range(16)))
            return [(x.status_code, x.http_version) for x in rs]
    got = asyncio.run(sixteen())
    H.check(got == [(200, "HTTP/2")] * 16, "httpx http2=True: %r" % got)
    st = tls_origin.stats("alpn.test")
    H.check(st["peak"] == 2 and st["count"] == 17, "TLS h2 origin: %d requests, peak %d" % (st["count"], st["peak"]))
    H.check(1 <= st["connections"] <= icfg["workers"], "TLS h2 origin: %d connections" % st["connections"])
    H.log("6. auto over TLS: curl --http2 and httpx get HTTP/2, the origin saw HTTP/2 (ALPN), 16 at once -> peak %d"
          % st["peak"])
    tls_origin.close()

    # 7. An origin that answers before reading the request body, then resets the stream:
    #    the HTTP/1.1 client gets the answer, and what the proxy did not read of the body
    #    is never taken for a next request (the connection closes, or the body was read
    #    whole and the next request is a real one).
    got = raw_exchange(proxy.port, ("POST %s/early HTTP/1.1\r\nHost: h2c.test\r\nContent-Length: 200000\r\n\r\n"
                                    % base).encode() + pattern(200000) +
                       ("GET %s/after HTTP/1.1\r\nHost: h2c.test\r\n\r\n" % base).encode())
    statuses = [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
    closed = b"connection: close" in got.split(b"\r\n\r\n")[0].lower()
    H.check(statuses in ([413], [413, 200]) and (closed or statuses == [413, 200]),
            "early answer with the body unread: statuses %r, %r" % (statuses, got[:400]))
    H.log("7. origin answering 413 and resetting before the body: client got %r%s" %
          (statuses, " then the close (body not read whole)" if closed else " (body read whole, next request served)"))

    # 8. An h2 client resets a stream the origin is working on: the origin stream is
    #    reset too and the slot comes back at once (not after timeouts.response_headers).
    resets = h2c.stats("h2c.test")["resets"]
    c = H2Client(proxy.port)
    sid = c.request(authority, "/delay/5000")
    H.wait_until(lambda: h2c.stats("h2c.test")["in_flight"] == 1, 3.0, what="the stream at the origin")
    c.reset(sid)
    H.wait_until(lambda: h2c.stats("h2c.test")["resets"] == resets + 1, 2.0, what="the origin stream reset")
    H.wait_until(lambda: proxy.hosts()["h2c.test"]["in_flight"] == 0, 2.0, what="the slot back")
    c.close()
    H.log("8. a client reset reaches the origin stream and frees the slot at once")

    # 9. Trailers from an h2 origin: to an HTTP/1.1 client in the chunked body's trailer
    #    section, to an h2 client as a trailing HEADERS.
    got = raw_exchange(proxy.port, ("GET %s/trailers HTTP/1.1\r\nHost: h2c.test\r\nTE: trailers\r\n"
                                    "Connection: close\r\n\r\n" % base).encode())
    head, _, body = got.partition(b"\r\n\r\n")
    H.check(b"transfer-encoding: chunked" in head.lower() and body.endswith(
        b"0\r\nx-checksum: sha256=abc\r\ngrpc-status: 0\r\n\r\n") and b"\r\nok\r\n" in body,
            "HTTP/1.1 client, trailers: %r" % got[-200:])
    got = raw_exchange(proxy.port, ("POST %s/echo HTTP/1.1\r\nHost: h2c.test\r\nTransfer-Encoding: chunked\r\n"
                                    "Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-Upload-Digest: xyz\r\n"
                                    "Content-Length: 99\r\n\r\n" % base).encode())
    echoed = json.loads(got.partition(b"\r\n\r\n")[2])
    H.check(echoed["trailers"] == [["x-upload-digest", "xyz"]] and echoed["length"] == 5,
            "HTTP/1.1 client's request trailers at the h2 origin: %r" % echoed["trailers"])
    c = H2Client(proxy.port)
    up = c.request(authority, "/echo", method="POST", body=pattern(100000), trailers=[("x-upload-digest", "xyz")])
    H.check(c.pump(c.done([up]), 10) and c.responses[up]["status"] == 200, "h2 client, request trailers: %r"
            % c.responses[up]["status"])
    echoed = json.loads(c.responses[up]["body"])
    H.check(echoed["trailers"] == [["x-upload-digest", "xyz"]] and echoed["sha256"] == sha(pattern(100000)),
            "the h2 origin got request trailers %r" % echoed["trailers"])
    sid = c.request(authority, "/trailers")
    H.check(c.pump(c.done([sid]), 10) and c.responses[sid]["status"] == 200 and c.responses[sid]["body"] == b"ok"
            and c.responses[sid].get("trailers") == {"x-checksum": "sha256=abc", "grpc-status": "0"},
            "h2 client, trailers: %r" % c.responses[sid])
    c.close()
    H.log("9. an h2 origin's trailers reach an HTTP/1.1 client (chunked trailer section) and an h2 client (HEADERS); "
          "request trailers from both kinds of client reach the h2 origin")

    for p in (proxy, iproxy):
        for key, h in p.hosts_settled().items():
            H.check(h["in_flight"] == 0 and h["waiting"] == 0, "%s left in_flight %d waiting %d"
                    % (key, h["in_flight"], h["waiting"]))
    for o in (h2c, ceiling, restarting):
        o.close()


if __name__ == "__main__":
    H.main(test, timeout=120)
