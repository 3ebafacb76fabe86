#!/usr/bin/python3
"""HTTP/1.1 message framing through the proxy, against a raw-socket origin
(raw_origin.py: it answers with exact bytes and records the connections it accepted and
every request byte it saw). Each case runs on a client keep-alive connection to the
proxy, mostly with a second request behind the first, so a framing error shows up as
stray bytes or a corrupted second response:
1. HEAD answered 200 with Transfer-Encoding: chunked, and with Content-Length: 5000,
   and no body: header only.
2. 204 and 304 with Transfer-Encoding: chunked and no body: header only.
3. A close-delimited origin body: re-framed as chunked for an HTTP/1.1 client (which
   keeps its connection); raw, then close, for an HTTP/1.0 client.
4. A chunked origin body to an HTTP/1.0 client: de-chunked raw body, then close.
5. Keep-alive pool: 5 sequential GETs use one origin connection; a pooled connection
   the origin closed while idle does not fail the next GET, which the origin sees once.
6. The forwarded request: origin-form target, Host from the target, hop-by-hop headers
   removed, Via added, end-to-end headers kept.
7. Expect: 100-continue: the proxy answers 100 Continue, the origin gets the whole body
   and no Expect header, the client gets the final response.
8. Pipelined: a POST with a 10-byte body and a GET behind it in one write (both arrive
   with the header, so the body is cut from the buffered bytes), then the same with a
   70000-byte body: the origin gets exactly each body, then the GET; the client gets
   the responses in order, each GET's a 100000-byte Content-Length body, byte for byte.
9. Hostile origin response heads (obs-fold, bare LF, whitespace before the colon,
   control bytes, bad status lines, conflicting lengths): 502, and the proxy serves
   the next request; lenient-but-harmless forms (no reason phrase, a later HTTP/1.x,
   odd whitespace around values) are forwarded in canonical form."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from raw_origin import RawOrigin, ok  # noqa: E402

DOMAIN = "framing.test"
HOP_HEADERS = ("connection", "x-hop", "proxy-connection", "keep-alive", "te", "upgrade",
               "proxy-authorization", "expect")


# --------------------------------------------------------------------------------------
# a client connection that keeps every byte it received
# --------------------------------------------------------------------------------------
class Client(H.RawClient):
    """self.raw (see harness) keeps every byte received."""

    def mark(self):
        return len(self.raw)

    def since(self, mark):
        return self.raw[mark:]


def req_bytes(method, host, port, path, version="HTTP/1.1", headers=""):
    return ("%s http://%s:%d%s %s\r\nHost: %s:%d\r\n%s\r\n"
            % (method, host, port, path, version, host, port, headers)).encode()


def exchange(c, data, what, head=False, timeout=10):
    """Send one request, read one final response (a stray 1xx is an error here)."""
    m = c.mark()
    c.send(data)
    r = c.read_response(timeout=timeout, head_request=head)
    H.check(r is not None, "%s: no complete response within %ss; received %r (eof=%s,"
            " send error %s)" % (what, timeout, c.since(m)[:600], c.eof, c.send_error))
    return r, c.since(m)


def expect_quiet(c, what, settle=0.4):
    """Nothing more may arrive after a complete response on a kept-alive connection."""
    H.check(not c.buf, "%s: %d stray byte(s) after the response: %r"
            % (what, len(c.buf), c.buf[:300]))
    m = c.mark()
    got = c._fill(time.monotonic() + settle)
    H.check(not got, "%s: %d stray byte(s) arrived after the response: %r"
            % (what, len(c.since(m)), c.since(m)[:300]))
    H.check(not c.eof, "%s: the proxy closed a keep-alive connection after the response"
            % what)


def expect_eof(c, what, timeout=5):
    deadline = time.monotonic() + timeout
    m = c.mark()
    while not c.eof and c._fill(deadline):
        pass
    H.check(c.eof, "%s: the proxy did not close the connection within %ss of the"
            " response (HTTP/1.0 close-delimited body); more bytes: %r"
            % (what, timeout, c.since(m)[:300]))
    H.check(not c.buf, "%s: bytes after the body before the close: %r" % (what, c.buf[:300]))


def body_after_head(raw):
    return raw.partition(b"\r\n\r\n")[2]


def check_second(c, origin, host, what, path="/second"):
    """A second request on the same client connection gets a clean response."""
    r, raw = exchange(c, req_bytes("GET", host, origin.port, path), what + ", second request")
    H.check(r.status == 200 and r.body == b"second response",
            "%s, second request on the same client connection: got %d, body %r; raw %r"
            % (what, r.status, r.body[:200], raw[:600]))
    expect_quiet(c, what + ", second request")


# --------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------
def case_head_chunked(t):
    host = "head." + DOMAIN
    head_resp = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    head_length_resp = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                        b"Content-Length: 5000\r\n\r\n")

    def handler(req):
        if req["method"] == "HEAD":
            return (head_length_resp if req["target"] == "/length" else head_resp), "keep"
        return ok(b"second response"), "keep"
    o = RawOrigin("head", handler)
    t.origins.append(o)
    c = Client(t.p.port)
    try:
        r, raw = exchange(c, req_bytes("HEAD", host, o.port, "/head"), "HEAD", head=True)
        H.check(r.status == 200, "HEAD: status %d, raw %r" % (r.status, raw[:600]))
        H.check(b"0\r\n\r\n" not in body_after_head(raw),
                "HEAD: the proxy sent a chunk terminator after the header: %r" % raw[:600])
        expect_quiet(c, "HEAD answered 200 with Transfer-Encoding: chunked, no body")
        check_second(c, o, host, "after HEAD")
        # Content-Length names the size of the body a GET would get: none follows
        r, raw = exchange(c, req_bytes("HEAD", host, o.port, "/length"), "HEAD (length)",
                          head=True, timeout=5)
        H.check(r.status == 200 and r.header("Content-Length") == "5000",
                "HEAD with Content-Length: status %d, raw %r" % (r.status, raw[:600]))
        expect_quiet(c, "HEAD answered 200 with Content-Length: 5000, no body")
        check_second(c, o, host, "after HEAD with Content-Length")
    finally:
        c.close()
    H.log("HEAD with a chunked 200 and with Content-Length: header only, second request"
          " clean (%s)" % o.summary())


def case_204_304_chunked(t):
    host = "nobody." + DOMAIN

    def handler(req):
        if req["target"] == "/204":
            return (b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n"), "keep"
        if req["target"] == "/304":
            return (b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"), "keep"
        return ok(b"second response"), "keep"
    o = RawOrigin("204/304", handler)
    t.origins.append(o)
    c = Client(t.p.port)
    try:
        for status, path, extra in ((204, "/204", ""), (304, "/304", "If-None-Match: \"v1\"\r\n")):
            what = "%d with Transfer-Encoding: chunked, no body" % status
            r, raw = exchange(c, req_bytes("GET", host, o.port, path, headers=extra), what)
            H.check(r.status == status, "%s: got status %d, raw %r" % (what, r.status, raw[:600]))
            H.check(b"0\r\n\r\n" not in body_after_head(raw),
                    "%s: the proxy sent a chunk terminator after the header: %r" % (what, raw[:600]))
            expect_quiet(c, what)
        check_second(c, o, host, "after 204 and 304")
    finally:
        c.close()
    H.log("204 and 304 with chunked: header only, next request clean (%s)" % o.summary())


def case_close_delimited(t):
    host = "eof." + DOMAIN
    body = b"".join(b"%05d," % i for i in range(10000))[:50000]  # 50 KB, over 3 relay chunks

    def handler(req):
        if req["target"] == "/eof":
            # no Content-Length, no chunked: the body ends when the origin closes
            return [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", body[:20000],
                    0.1, body[20000:]], "close"
        return ok(b"second response"), "keep"
    o = RawOrigin("close-delimited", handler)
    t.origins.append(o)

    # HTTP/1.1 client: re-framed as chunked, connection stays usable
    c = Client(t.p.port)
    try:
        what = "close-delimited body to an HTTP/1.1 client"
        r, raw = exchange(c, req_bytes("GET", host, o.port, "/eof"), what)
        te = (r.header("Transfer-Encoding") or "").lower()
        H.check(r.status == 200 and "chunked" in te,
                "%s: expected 200 re-framed with Transfer-Encoding: chunked, got %d headers %s;"
                " first bytes %r" % (what, r.status, r.headers, raw[:400]))
        H.check(r.body == body, "%s: de-chunked body is %d bytes, expected %d (equal: %s);"
                " tail of raw %r" % (what, len(r.body), len(body), r.body == body, raw[-200:]))
        H.check(raw.endswith(b"\r\n0\r\n\r\n"), "%s: raw response does not end with the last"
                " chunk: tail %r" % (what, raw[-200:]))
        H.check(not (r.header("Connection") or "").lower().startswith("close"),
                "%s: the proxy said Connection: %s" % (what, r.header("Connection")))
        expect_quiet(c, what)
        check_second(c, o, host, what)
    finally:
        c.close()
    H.log("close-delimited body, HTTP/1.1 client: chunked, %d bytes, connection kept"
          % len(body))

    # HTTP/1.0 client: raw body, then the proxy closes
    c = Client(t.p.port)
    try:
        what = "close-delimited body to an HTTP/1.0 client"
        r, raw = exchange(c, req_bytes("GET", host, o.port, "/eof", version="HTTP/1.0"), what)
        H.check(r.status == 200, "%s: status %d, raw %r" % (what, r.status, raw[:400]))
        H.check("chunked" not in (r.header("Transfer-Encoding") or "").lower(),
                "%s: the proxy used chunked framing for an HTTP/1.0 client: headers %s"
                % (what, r.headers))
        expect_eof(c, what)
        got = body_after_head(c.raw)
        H.check(got == body, "%s: received %d body bytes, expected the raw %d (equal: %s);"
                " first bytes %r, last %r" % (what, len(got), len(body), got == body,
                                              got[:80], got[-80:]))
    finally:
        c.close()
    H.log("close-delimited body, HTTP/1.0 client: raw %d bytes, then close" % len(body))


def case_chunked_to_http10(t):
    host = "dechunk." + DOMAIN
    chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n" b"6;ext=1\r\n world\r\n" b"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n"
               b"0\r\n\r\n")
    want = b"hello worldabcdefghijklmnopqrstuvwxyz"
    o = RawOrigin("chunked", lambda req: (chunked, "keep"))
    t.origins.append(o)
    c = Client(t.p.port)
    try:
        what = "chunked origin body to an HTTP/1.0 client"
        r, raw = exchange(c, req_bytes("GET", host, o.port, "/chunked", version="HTTP/1.0"),
                          what)
        H.check(r.status == 200, "%s: status %d, raw %r" % (what, r.status, raw[:400]))
        H.check("chunked" not in (r.header("Transfer-Encoding") or "").lower(),
                "%s: Transfer-Encoding: chunked sent to an HTTP/1.0 client: %r"
                % (what, raw[:400]))
        expect_eof(c, what)
        got = body_after_head(c.raw)
        H.check(got == want, "%s: body %r, expected the de-chunked %r" % (what, got[:300], want))
    finally:
        c.close()
    H.log("chunked origin body, HTTP/1.0 client: de-chunked %r, then close" % want)


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


# (name, the origin's raw response, the status the client gets, lines its head must hold)
HOSTILE_HEADS = [
    ("obs-fold", b"HTTP/1.1 200 OK\r\nX-A: a\r\n folded\r\nContent-Length: 2\r\n\r\nok", 502, []),
    ("bare LF", b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 502, []),
    ("space before colon", b"HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 2\r\n\r\nok", 502, []),
    ("NUL in a value", b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok", 502, []),
    ("CR in a value", b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok", 502, []),
    ("two-digit status", b"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok", 502, []),
    ("HTTP/2.0 status line", b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 502, []),
    ("lengths that differ", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", 502, []),
    ("no reason phrase", b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", 200, ["HTTP/1.1 200 OK"]),
    ("HTTP/1.2", b"HTTP/1.2 200 Fine\r\nContent-Length: 2\r\n\r\nok", 200, ["HTTP/1.1 200 Fine"]),
    ("whitespace around values", b"HTTP/1.1 200 OK\r\nX-B:b\r\nX-C: \t c \t\r\nContent-Length: 2\r\n\r\nok",
     200, ["X-B: b", "X-C: c"]),
]


def case_hostile_response_heads(t):
    host = "hostile-heads." + DOMAIN
    by_path = {"/%d" % i: raw for i, (_, raw, _, _) in enumerate(HOSTILE_HEADS)}
    o = RawOrigin("hostile-heads", lambda req: (by_path.get(req["target"], b"")
                                                or ok(b"second response"), "close"))
    t.origins.append(o)
    for i, (name, _, status, lines) in enumerate(HOSTILE_HEADS):
        what = "origin response with %s" % name
        c = Client(t.p.port)
        try:
            r, raw = exchange(c, req_bytes("GET", host, o.port, "/%d" % i), what)
            head = raw.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            H.check(r.status == status, "%s: the client got %d, not %d; raw %r" % (what, r.status, status, raw[:400]))
            for line in lines:
                H.check(line in head, "%s: %r is not in the forwarded head %r" % (what, line, head))
            if status == 200:
                H.check(r.body == b"ok", "%s: body %r" % (what, r.body))
                check_second(c, o, host, what)
        finally:
            c.close()
        if status != 200:  # the 502 closed the client's connection: the next one is served
            c = Client(t.p.port)
            try:
                check_second(c, o, host, what + ", then a new connection")
            finally:
                c.close()
    H.log("hostile response heads: %d refused with 502, %d forwarded in canonical form; a second"
          " request was served after each"
          % (sum(1 for row in HOSTILE_HEADS if row[2] == 502), sum(1 for row in HOSTILE_HEADS if row[2] == 200)))

CASES = [
    ("1 HEAD + chunked", case_head_chunked),
    ("2 204/304 + chunked", case_204_304_chunked),
    ("3 close-delimited body", case_close_delimited),
    ("4 chunked to HTTP/1.0", case_chunked_to_http10),
    ("5 keep-alive pool", case_pool),
    ("6 request rewrite", case_request_rewrite),
    ("7 Expect: 100-continue", case_expect_continue),
    ("8 pipelined body + request", case_pipelined),
    ("9 hostile response heads", case_hostile_response_heads),
]


def test(t):
    t.p = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    failures = []
    for name, fn in CASES:
        try:
            fn(t)
            H.log("case %s: ok" % name)
        except AssertionError as e:
            H.log("case %s: FAILED: %s" % (name, e))
            failures.append("case %s: %s" % (name, e))
        H.check(t.p.alive(), "the proxy died during case %s" % name)
    H.check(not failures, "%d of %d cases failed:\n  %s"
            % (len(failures), len(CASES), "\n  ".join(failures)))


if __name__ == "__main__":
    H.main(test, timeout=50)
