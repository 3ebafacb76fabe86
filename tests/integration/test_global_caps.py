#!/usr/bin/python3
"""Caps across all hosts and clients, so no client can grow the proxy's memory without
end by spreading over hosts or connections.

1. limits.max_parked: 5 (concurrency 1, the origin holds each request 1 s): 14 requests
   at once over 4 hosts -> 4 in flight, 5 parked, the other 5 answered 503 with
   Retry-After and Proxy-Status error=connection_limit_reached at once; every parked one
   and every one in flight gets 200. rejected_total{reason="max_parked"} counts the 5.
   The places come back: the same batch again behaves the same.
   Over h2c too: 14 streams on one connection, the same split.
2. limits.max_client_connections: 3: three open connections, a fourth is closed as it
   is accepted (rejected_total{reason="max_client_connections"} 1); once one of the
   three closes, a new connection is served."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from test_h2c import H2Client  # noqa: E402


def rejected(proxy, reason):
    return H.mget(proxy.metrics(), "politeproxy_rejected_total", 0.0, reason=reason)


def batch(proxy, origin, tag):
    urls = ["http://cap%d.test:%d/x?delay=1&%s=%d" % (i % 4, origin.port, tag, i) for i in range(14)]
    started = time.monotonic()
    res = H.concurrent(proxy, urls, timeout=30)
    statuses = sorted(r.status for r in res)
    refused = [r for r in res if r.status == 503]
    H.log("%s: statuses %s; the 503s answered within %.2f s" % (
        tag, statuses, max((r.t_end - started for r in refused), default=0)))
    H.check(statuses == [200] * 9 + [503] * 5, "%s: 14 requests with 4 in flight and max_parked 5 got %s"
            % (tag, statuses))
    for r in refused:
        H.check(r.header("Retry-After"), "%s: a 503 without Retry-After" % tag)
        H.check("error=connection_limit_reached" in (r.header("Proxy-Status") or ""),
                "%s: Proxy-Status %r" % (tag, r.header("Proxy-Status")))
        H.check(r.t_end - started < 1.5, "%s: a refusal took %.2f s: it was parked first" % (tag, r.t_end - started))


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=1, rate=100, burst=100)
    cfg["limits"] = {"max_parked": 5, "max_client_connections": 40}
    proxy = t.proxy(cfg)

    # 1. max_parked, twice: the places come back.
    batch(proxy, origin, "first")
    batch(proxy, origin, "again")
    H.check(rejected(proxy, "max_parked") == 10, "rejected_total{reason=max_parked} is %s, expected 10"
            % rejected(proxy, "max_parked"))
    h = H2Client(proxy.port)
    streams = [h.request("cap%d.test:%d" % (i % 4, origin.port), "/x?delay=1&h2=%d" % i, send=False) for i in range(14)]
    h.flush()
    H.check(h.pump(h.done(streams), timeout=20), "the h2c streams were not all answered")
    statuses = sorted(h.responses[s]["status"] for s in streams)
    H.log("h2c: 14 streams on one connection: %s" % statuses)
    H.check(statuses == [200] * 9 + [503] * 5, "h2c: 14 streams with max_parked 5 got %s" % statuses)
    h.close()

    # 2. max_client_connections.
    cfg = H.base_config(concurrency=4, rate=100, burst=100)
    cfg["limits"] = {"max_client_connections": 3}
    capped = t.proxy(cfg, name="capped")
    held = [socket.create_connection(("127.0.0.1", capped.port), timeout=5) for _ in range(3)]
    time.sleep(0.3)  # the three are accepted and counted
    extra = socket.create_connection(("127.0.0.1", capped.port), timeout=5)
    extra.sendall(b"GET http://c.test:%d/x HTTP/1.1\r\nHost: c.test\r\n\r\n" % origin.port)
    try:
        got = extra.recv(1024)
    except ConnectionResetError:
        got = b""
    extra.close()
    H.log("a fourth connection with max_client_connections 3: %r" % got[:40])
    H.check(got == b"", "a fourth connection over max_client_connections 3 was served: %r" % got[:80])
    H.check(rejected(capped, "max_client_connections") == 1, "rejected_total{reason=max_client_connections} is %s"
            % rejected(capped, "max_client_connections"))
    held.pop().close()
    time.sleep(0.3)
    r = H.request(capped, "http://c.test:%d/x" % origin.port)
    H.check(r.status == 200, "once a connection closed, a new one was not served: %s" % r)
    for s in held:
        s.close()


if __name__ == "__main__":
    H.main(test, timeout=60)
