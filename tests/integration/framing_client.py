"""The client side of the framing tests (test_framing_responses.py,
test_framing_requests.py): a keep-alive client connection to the proxy that keeps every
byte it received, the bytes of a request, one request/response exchange, the checks
that nothing stray follows a response (or that the connection closes), a clean second
request on the same connection, and run_cases(), which runs every case on one proxy and
reports the failures of all of them together."""
import time

import harness as H

DOMAIN = "framing.test"


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


def run_cases(t, cases):
    """Every (name, fn) of `cases` against the proxy t.p, fn(t) each; the failures of all
    of them are reported together."""
    failures = []
    for name, fn in cases:
        try:
            fn(t)
            H.log("case %s: ok" % name)
        except AssertionError as e:
            H.log("case %s: FAILED: %s" % (name, e))
            failures.append("case %s: %s" % (name, e))
        H.check(t.p.alive(), "the proxy died during case %s" % name)
    H.check(not failures, "%d of %d cases failed:\n  %s"
            % (len(failures), len(cases), "\n  ".join(failures)))
