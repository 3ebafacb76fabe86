#!/usr/bin/python3
"""HTTP/1.1 framing of the requests the origin gets through the proxy, and the origin
connections they go on, against a raw-socket origin (raw_origin.py: it answers with
exact bytes and records the connections it accepted and every request byte it saw).
Each case runs on a client keep-alive connection to the proxy, mostly with a second
request behind the first, so a framing error shows up as stray bytes or a corrupted
second response (framing_client.py):
1. Keep-alive pool: 5 sequential GETs use one origin connection; a pooled connection
   the origin closed while idle does not fail the next GET, which the origin sees once.
2. The forwarded request: origin-form target, Host from the target, hop-by-hop headers
   removed, Via added, end-to-end headers kept.
3. Expect: 100-continue: the proxy answers 100 Continue, the origin gets the whole body
   and no Expect header, the client gets the final response.
4. Pipelined: a POST with a 10-byte body and a GET behind it in one write (both arrive
   with the header, so the body is cut from the buffered bytes), then the same with a
   70000-byte body: the origin gets exactly each body, then the GET; the client gets
   the responses in order, each GET's a 100000-byte Content-Length body, byte for byte.
The origin's responses: test_framing_responses.py."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from framing_client import (  # noqa: E402
    DOMAIN, Client, check_second, exchange, expect_quiet, req_bytes, run_cases)
from raw_origin import RawOrigin, ok  # noqa: E402

HOP_HEADERS = ("connection", "x-hop", "proxy-connection", "keep-alive", "te", "upgrade",
               "proxy-authorization", "expect")


def case_pool(t):
    # five sequential GETs on one client connection: one origin connection
    host = "pool." + DOMAIN
    o = RawOrigin("pool", lambda req: (ok(("pooled %s" % req["target"]).encode()), "keep"))
    t.origins.append(o)
    c = Client(t.p.port)
    try:
        for i in range(5):
            path = "/pool-%d" % i
            r, raw = exchange(c, req_bytes("GET", host, o.port, path), "pool GET %d" % i)
            H.check(r.status == 200 and r.body == ("pooled %s" % path).encode(),
                    "pool GET %d: status %d body %r raw %r" % (i, r.status, r.body[:200],
                                                               raw[:400]))
            H.check(not c.buf, "pool GET %d: stray bytes %r" % (i, c.buf[:200]))
    finally:
        c.close()
    H.check(o.accepted == 1, "5 sequential GETs to one origin should reuse one origin"
            " connection; %s" % o.summary())
    H.log("5 sequential GETs, 1 origin connection")

    # a pooled connection the origin closes silently while idle
    host = "stale." + DOMAIN

    def handler(req):
        if req["target"] == "/stale-1":
            # answer, keep the connection open (keep-alive), then close it while idle
            return ok(b"first response"), 0.3
        return ok(b"second response"), "keep"
    o = RawOrigin("stale", handler)
    t.origins.append(o)
    c = Client(t.p.port)
    try:
        r, raw = exchange(c, req_bytes("GET", host, o.port, "/stale-1"), "stale: first GET")
        H.check(r.status == 200 and r.body == b"first response",
                "stale: first GET: %d %r raw %r" % (r.status, r.body[:200], raw[:400]))
        # the origin closes its side 0.3 s after the response; wait past that
        H.check(H.wait_until(lambda: _first_conn_closed(o), 5),
                "stale: the origin did not close its first connection; %s" % o.summary())
        time.sleep(0.5)
        what = "stale: second GET after the origin closed the pooled connection"
        r, raw = exchange(c, req_bytes("GET", host, o.port, "/stale-2"), what)
        H.check(r.status == 200 and r.body == b"second response",
                "%s: got %d %s body %r; raw %r; %s" % (what, r.status, r.headers, r.body[:200],
                                                       raw[:600], o.summary()))
        expect_quiet(c, what)
    finally:
        c.close()
    copies = o.all_received().count(b"GET /stale-2 HTTP/1.1\r\n")
    H.check(copies == 1, "stale: the origin saw the second request %d time(s), expected once;"
            " %s" % (copies, o.summary()))
    H.check(o.accepted == 2, "stale: expected 2 origin connections (the closed one and a"
            " fresh one); %s" % o.summary())
    H.log("stale pooled connection: second GET succeeded, origin saw it once (%s)"
          % o.summary())


def _first_conn_closed(o):
    with o.lock:
        conns = list(o._conns)
    return bool(conns) and conns[0].fileno() == -1


def case_request_rewrite(t):
    host = "rewrite." + DOMAIN
    o = RawOrigin("rewrite", lambda req: (ok(b"second response"), "keep"))
    t.origins.append(o)
    c = Client(t.p.port)
    try:
        data = ("GET http://%s:%d/path?q=1 HTTP/1.1\r\n"
                "Host: wrong-host.example:1234\r\n"
                "User-Agent: framing-test/1\r\n"
                "Accept: text/plain\r\n"
                "X-End-To-End: keep-me\r\n"
                "Cookie: a=b\r\n"
                "Connection: keep-alive, X-Hop\r\n"
                "X-Hop: 1\r\n"
                "Proxy-Connection: keep-alive\r\n"
                "Keep-Alive: timeout=5\r\n"
                "TE: trailers\r\n"
                "Upgrade: websocket\r\n"
                "Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"
                "\r\n" % (host, o.port)).encode()
        r, raw = exchange(c, data, "rewrite: GET with hop-by-hop headers")
        H.check(r.status == 200, "rewrite: status %d raw %r" % (r.status, raw[:400]))
        expect_quiet(c, "rewrite")
        check_second(c, o, host, "rewrite")
    finally:
        c.close()
    reqs = o.reqs()
    H.check(len(reqs) == 2, "rewrite: origin saw %d requests; %s" % (len(reqs), o.summary()))
    fwd = reqs[0]
    head = fwd["head"].decode("latin-1")
    first_line = head.split("\r\n")[0]
    H.check(first_line == "GET /path?q=1 HTTP/1.1",
            "rewrite: request line at the origin is %r, expected 'GET /path?q=1 HTTP/1.1';"
            " header section:\n%s" % (first_line, head))
    hosts = [v for k, v in fwd["headers"] if k.lower() == "host"]
    H.check(hosts == ["%s:%d" % (host, o.port)],
            "rewrite: Host at the origin is %r, expected exactly ['%s:%d']; header section:\n%s"
            % (hosts, host, o.port, head))
    names = [k.lower() for k, _ in fwd["headers"]]
    leaked = [(k, v) for k, v in fwd["headers"]
              if k.lower() in HOP_HEADERS and not
              (k.lower() == "connection" and v.lower().strip() in ("keep-alive", "close"))]
    H.check(not leaked, "rewrite: hop-by-hop headers forwarded to the origin: %s;"
            " header section:\n%s" % (leaked, head))
    via = ", ".join(v for k, v in fwd["headers"] if k.lower() == "via")
    H.check("politeproxy" in via, "rewrite: no Via entry with 'politeproxy' at the origin"
            " (Via: %r); header section:\n%s" % (via, head))
    hd = {k.lower(): v for k, v in fwd["headers"]}
    for k, v in (("user-agent", "framing-test/1"), ("accept", "text/plain"),
                 ("x-end-to-end", "keep-me"), ("cookie", "a=b")):
        H.check(hd.get(k) == v, "rewrite: end-to-end header %s: %r at the origin, expected %r;"
                " header section:\n%s" % (k, hd.get(k), v, head))
    H.check(names.count("host") == 1, "rewrite: %d Host headers" % names.count("host"))
    H.log("rewrite: origin saw %r" % head)


def case_expect_continue(t):
    host = "expect." + DOMAIN
    o = RawOrigin("expect", lambda req: (
        ok(("got %d bytes" % len(req["body"])).encode()) if req["method"] == "POST"
        else ok(b"second response"), "keep"))
    t.origins.append(o)
    data = bytes((i * 7 + 3) % 256 for i in range(1024))
    c = Client(t.p.port)
    try:
        what = "Expect: 100-continue POST"
        m = c.mark()
        c.send(req_bytes("POST", host, o.port, "/upload", headers=(
            "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n"
            "Expect: 100-continue\r\n" % len(data))))
        r = c.read_response(timeout=5)
        H.check(r is not None, "%s: nothing complete within 5s before the body was sent;"
                " received %r; %s" % (what, c.since(m)[:400], o.summary()))
        H.check(r.status == 100 and c.since(m).startswith(b"HTTP/1.1 100 Continue\r\n"),
                "%s: expected 'HTTP/1.1 100 Continue' before the body, got %r"
                % (what, c.since(m)[:400]))
        H.check(not c.buf, "%s: bytes after the 100 Continue before the body was sent: %r"
                % (what, c.buf[:300]))
        c.send(data)
        r = c.read_response(timeout=10)
        H.check(r is not None and r.status == 200 and r.body == b"got 1024 bytes",
                "%s: final response %r body %r; received %r; %s"
                % (what, r, r and r.body[:200], c.since(m)[:600], o.summary()))
        expect_quiet(c, what)
        check_second(c, o, host, what)
    finally:
        c.close()
    reqs = o.reqs()
    H.check(reqs and reqs[0]["method"] == "POST", "expect: %s" % o.summary())
    post = reqs[0]
    H.check(post["body"] == data, "expect: origin received %d body bytes (equal: %s),"
            " expected %d" % (len(post["body"]), post["body"] == data, len(data)))
    exp = [v for k, v in post["headers"] if k.lower() == "expect"]
    H.check(not exp, "expect: the Expect header reached the origin: %r; header section:\n%s"
            % (exp, post["head"].decode("latin-1")))
    H.log("Expect: 100-continue: 100 from the proxy, origin got %d bytes, no Expect"
          % len(post["body"]))


def case_pipelined(t):
    host = "pipelined." + DOMAIN
    big = bytes((i * 13 + 5) % 256 for i in range(100000))
    o = RawOrigin("pipelined", lambda req: (
        ok(("got %d bytes" % len(req["body"])).encode()) if req["method"] == "POST"
        else ok(big), "keep"))
    t.origins.append(o)
    uploads = [b"0123456789", bytes((i * 7 + 1) % 256 for i in range(70000))]
    c = Client(t.p.port)
    try:
        for upload in uploads:
            what = "pipelined POST (%d-byte body) + GET" % len(upload)
            m = c.mark()
            c.send(req_bytes("POST", host, o.port, "/upload", headers=(
                "Content-Length: %d\r\n" % len(upload))) + upload
                + req_bytes("GET", host, o.port, "/big"))
            first = c.read_response(timeout=10)
            want = ("got %d bytes" % len(upload)).encode()
            H.check(first is not None and first.status == 200 and first.body == want,
                    "%s: first response %r body %r; received %r; %s"
                    % (what, first, first and first.body[:100], c.since(m)[:400], o.summary()))
            second = c.read_response(timeout=10)
            H.check(second is not None and second.status == 200 and second.body == big,
                    "%s: second response %r, body of %s bytes (equal: %s); %s"
                    % (what, second, second and len(second.body),
                       second and second.body == big, o.summary()))
            expect_quiet(c, what)
    finally:
        c.close()
    reqs = o.reqs()
    H.check([r["method"] for r in reqs] == ["POST", "GET"] * 2
            and [r["body"] for r in reqs[::2]] == uploads,
            "pipelined: origin saw %s; POST bodies %s bytes (equal: %s)"
            % ([(r["method"], r["target"]) for r in reqs], [len(r["body"]) for r in reqs[::2]],
               [r["body"] for r in reqs[::2]] == uploads))
    H.log("pipelined: origin got each body exactly, then the GET; client got both"
          " responses each time, the GET's 100000 bytes exact")


CASES = [
    ("1 keep-alive pool", case_pool),
    ("2 request rewrite", case_request_rewrite),
    ("3 Expect: 100-continue", case_expect_continue),
    ("4 pipelined body + request", case_pipelined),
]


def test(t):
    t.p = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    run_cases(t, CASES)


if __name__ == "__main__":
    H.main(test, timeout=50)
