#!/usr/bin/python3
"""Bad input gets the answers of SPEC's table, each with Proxy-Status, and the proxy
keeps serving afterwards:
- origin-form request to the proxy port -> 400
- CONNECT to a port not in security.connect_ports -> 403
- destination not allowed (loopback, no allow_destinations) -> 403
- request header section over 64 KiB -> 431
- HEAD to a port with nothing listening -> 502 without a body (RFC 9110 9.3.2), on a
  connection that then carries the next request in step (found by the soak test)
None of them reaches the origin."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "bad.test"


def one_answer(proxy, data, what, timeout=5):
    c = H.RawClient(proxy.port, timeout=5)
    try:
        c.send(data)
        try:
            resps, leftover = c.read_all_responses(first_timeout=timeout, settle=0.3)
        except OSError as e:
            raise H.TestFailure("%s: connection error reading the answer: %s (send: %s)"
                                % (what, e, c.send_error))
    finally:
        c.close()
    H.check(resps, "%s: no complete response within %ss (send error: %s)"
            % (what, timeout, c.send_error))
    fin = [r for r in resps if r.status >= 200]
    H.check(len(fin) == 1, "%s: expected exactly one response, got %s" % (what, resps))
    return fin[0]


def expect(resp, status, what):
    H.check(resp.status == status, "%s: expected %d, got %d %s (headers %s, body %r)"
            % (what, status, resp.status, resp.reason, resp.headers, resp.body[:200]))
    ps = resp.header("Proxy-Status") or ""
    H.check("politeproxy" in ps and "error=" in ps,
            "%s: %d without 'Proxy-Status: politeproxy; error=...' (got %r)"
            % (what, status, ps))
    H.log("%s -> %d, Proxy-Status: %s" % (what, status, ps))


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config())
    op = origin.port

    # origin-form request (as if the proxy were the origin)
    r = one_answer(proxy, ("GET /origin-form HTTP/1.1\r\nHost: %s:%d\r\n"
                           "Connection: close\r\n\r\n" % (HOST, op)).encode(),
                   "origin-form GET")
    expect(r, 400, "origin-form GET /")

    # CONNECT to a port not in connect_ports (the plain origin's port)
    r = one_answer(proxy, ("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                           % (HOST, op, HOST, op)).encode(), "CONNECT bad port")
    expect(r, 403, "CONNECT to port %d (not in connect_ports)" % op)

    # header section over 64 KiB: 70 headers of 1 KiB
    big = "".join("X-Filler-%02d: %s\r\n" % (i, "a" * 1024) for i in range(70))
    r = one_answer(proxy, H.raw_get(proxy.port, HOST, op, "/big", extra_headers=big),
                   "70 KiB header section")
    expect(r, 431, "request with a 70 KiB header section")

    # the proxy's own answer to a HEAD is its header alone: the next response on the
    # connection is read in step (a host of its own: a refused connection pauses it)
    closed_port = H.free_port()
    c = H.RawClient(proxy.port, timeout=5)
    try:
        c.send(("HEAD http://head.test:%d/head HTTP/1.1\r\nHost: head.test:%d\r\n\r\n"
                % (closed_port, closed_port)).encode())
        head = c.read_response(timeout=5, head_request=True)
        H.check(head is not None and head.status == 502,
                "HEAD to a closed port: expected 502, got %r" % head)
        H.check(int(head.header("Content-Length", "0")) > 0,
                "HEAD answer without the Content-Length a GET would get: %r" % head)
        c.send(H.raw_get(proxy.port, HOST, op, "/next?size=3", connection="close"))
        nxt = c.read_response(timeout=5)
        H.check(nxt is not None and nxt.status == 200 and nxt.body == b"012",
                "the request after a HEAD answer was read out of step: %r (buffered %r)"
                % (nxt, c.buf[:200]))
    finally:
        c.close()

    # still serving
    ok = H.request(proxy, "http://%s:%d/after?size=3" % (HOST, op), timeout=10)
    H.check(ok.error is None and ok.status == 200 and ok.body == b"012",
            "a normal request after the bad ones failed: %r %r" % (ok, ok.body[:200]))

    # destination not allowed: a proxy without allow_destinations denies loopback
    strict = t.proxy(H.base_config(allow_loopback=False), "strict")
    r = one_answer(strict, H.raw_get(strict.port, HOST, op, "/denied"), "loopback denied")
    expect(r, 403, "GET to a loopback destination without allow_destinations")
    tls_host = "tls.test"
    r = one_answer(strict, ("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n"
                            % (tls_host, tls_host)).encode(), "CONNECT loopback denied")
    expect(r, 403, "CONNECT to a loopback destination without allow_destinations")
    ok = H.request(strict, "http://%s:%d/after?size=3" % (HOST, op), timeout=10)
    H.check(ok.status == 403, "strict proxy: a loopback request after the bad ones got %r"
            % ok)

    st = origin.stats()
    seen = [(h, r["target"]) for h, s in st.items() for r in s["requests"]]
    H.check(seen == [(HOST, "/next?size=3"), (HOST, "/after?size=3")],
            "only the one normal request should have reached the origin, it saw %s" % seen)
    H.check(proxy.alive() and strict.alive(), "a proxy died")


if __name__ == "__main__":
    H.main(test, timeout=40)
