#!/usr/bin/python3
"""Clients that give up while queued leak nothing.

concurrency 2: 2 slow requests (2 s) are in flight, 10 more are queued from raw
sockets that are closed after ~0.6 s (half of them POSTs whose body arrives once they
are parked and waits unread in the socket, so only the TCP state shows the close).  After the slow ones finish, 2 new concurrent
slow requests are both in flight together at the origin (no slot leaked), the gauges
return to 0, and none of the abandoned requests ever reached the origin."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "leak.test"
N_ABANDON = 10


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    base = "http://%s:%d" % (HOST, origin.port)

    first = H.Background(proxy, [base + "/first?delay=2&i=%d" % i for i in range(2)],
                         timeout=20)
    st = H.wait_until(lambda: origin.host(HOST)["in_flight"] == 2 and origin.host(HOST), 2.0)
    H.check(st and st["in_flight"] == 2, "the first 2 requests did not both reach the origin:"
            " %r" % H.brief(origin.host(HOST)))

    abandoned = []
    for i in range(N_ABANDON):
        c = H.RawClient(proxy.port)
        if i % 2:  # its body follows once parked (below): readiness cannot show the close behind it
            c.send(("POST http://%s:%d/abandoned?i=%d HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: 5\r\n\r\n"
                    % (HOST, origin.port, i, HOST, origin.port)).encode())
        else:
            c.send(H.raw_get(proxy.port, HOST, origin.port, "/abandoned?delay=2&i=%d" % i,
                             connection="keep-alive"))
        abandoned.append(c)
    time.sleep(0.3)
    for c in abandoned[1::2]:
        c.send(b"hello")
    time.sleep(0.3)
    m = proxy.metrics()
    H.log("queued before closing: host_waiting=%s"
          % H.mget(m, "politeproxy_host_waiting", host=HOST))
    for c in abandoned:
        c.close()
    t_closed = time.monotonic()
    w = H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_host_waiting",
                                    host=HOST, default=0) == 0, 1.0)
    H.log("host_waiting %s 1 s after the clients closed (proxy noticed: %s)"
          % (H.mget(proxy.metrics(), "politeproxy_host_waiting", host=HOST), bool(w)))

    res1 = first.wait(20)
    bad = [r for r in res1 if r.error or r.status != 200]
    H.check(not bad, "first slow requests failed: %s" % bad)
    H.log("first pair done %.2fs after the abandoned clients closed"
          % (time.monotonic() - t_closed))

    t2 = time.monotonic()
    res2 = H.concurrent(proxy, [base + "/second?delay=1&i=%d" % i for i in range(2)],
                        timeout=15)
    H.log("second pair: %s" % res2)
    bad = [r for r in res2 if r.error or r.status != 200]
    H.check(not bad, "requests after the abandoned ones failed: %s" % bad)

    recs = origin.host(HOST)["requests"]
    second = [r for r in recs if r["target"].startswith("/second")]
    H.check(len(second) == 2, "origin saw %d of the 2 new requests" % len(second))
    peak2 = H.overlap_peak(second)
    H.check(peak2 == 2, "the 2 new slow requests were not in flight together at the origin"
            " (peak %d, took %.2fs): a slot leaked to an abandoned client"
            % (peak2, time.monotonic() - t2))

    leaked = [r["target"] for r in recs if r["target"].startswith("/abandoned")]
    H.check(not leaked, "%d requests whose clients had closed while queued still reached"
            " the origin: %s" % (len(leaked), leaked))
    st = origin.host(HOST)
    H.check(st["count"] == 4, "origin count for %s is %d, expected 4 (2 + 2 completed)"
            % (HOST, st["count"]))

    def idle():
        m = proxy.metrics()
        a = H.mget(m, "politeproxy_host_in_flight", host=HOST)
        b = H.mget(m, "politeproxy_host_waiting", host=HOST)
        return (a in (None, 0) and b in (None, 0), a, b)
    ok = H.wait_until(lambda: idle()[0], 3.0)
    _, a, b = idle()
    H.check(ok, "gauges did not return to 0: host_in_flight=%s host_waiting=%s" % (a, b))


if __name__ == "__main__":
    H.main(test, timeout=45)
