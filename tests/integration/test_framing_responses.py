#!/usr/bin/python3
"""HTTP/1.1 framing of the origin's responses through the proxy, against a raw-socket
origin (raw_origin.py: it answers with exact bytes and records the connections it
accepted and every request byte it saw). Each case runs on a client keep-alive
connection to the proxy, mostly with a second request behind the first, so a framing
error shows up as stray bytes or a corrupted second response (framing_client.py):
1. HEAD answered 200 with Transfer-Encoding: chunked, and with Content-Length: 5000,
   and no body: header only.
2. 204 and 304 with Transfer-Encoding: chunked and no body: header only.
3. A close-delimited origin body: re-framed as chunked for an HTTP/1.1 client (which
   keeps its connection); raw, then close, for an HTTP/1.0 client.
4. A chunked origin body to an HTTP/1.0 client: de-chunked raw body, then close.
5. Hostile origin response heads (obs-fold, bare LF, whitespace before the colon,
   control bytes, bad status lines, conflicting lengths): 502, and the proxy serves
   the next request; lenient-but-harmless forms (no reason phrase, a later HTTP/1.x,
   odd whitespace around values) are forwarded in canonical form.
The requests the origin gets: test_framing_requests.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from framing_client import (  # noqa: E402
    DOMAIN, Client, body_after_head, check_second, exchange, expect_eof, expect_quiet,
    req_bytes, run_cases)
from raw_origin import RawOrigin, ok  # noqa: E402


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
    ("5 hostile response heads", case_hostile_response_heads),
]


def test(t):
    t.p = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    run_cases(t, CASES)


if __name__ == "__main__":
    H.main(test, timeout=50)
