#!/usr/bin/python3
"""A slow host (concurrency 1, 3 s per response, several more requests queued behind
it) does not delay another host: requests to the second host complete in < 1 s while
the slow host's queue is full."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SLOW = "slow.test"
FAST = "fast.test"
N_SLOW = 5  # 1 in flight + 4 queued


def test(t):
    origin = t.origin()
    cfg = H.base_config(hosts={
        SLOW: {"concurrency": 1},
        FAST: {"concurrency": 8, "rate": 200, "burst": 10, "reason": "integration test"},
    })
    proxy = t.proxy(cfg)
    slow_clients = []
    for i in range(N_SLOW):
        c = H.RawClient(proxy.port)
        c.send(H.raw_get(proxy.port, SLOW, origin.port, "/s?delay=3&i=%d" % i))
        slow_clients.append(c)
    st = H.wait_until(lambda: origin.host(SLOW)["in_flight"] == 1 and origin.host(SLOW),
                      3.0)
    st = origin.host(SLOW)
    H.check(st["in_flight"] == 1 and st["peak"] == 1,
            "expected exactly 1 request of %s (concurrency 1) in flight at the origin,"
            " origin saw %r" % (SLOW, H.brief(st)))
    H.wait_until(lambda: (lambda m: H.mget(m, "politeproxy_host_waiting", host=SLOW)
                              == N_SLOW - 1 and m)(proxy.metrics()), 2.0)
    H.log("slow host waiting gauge: %s" % (
        H.mget(proxy.metrics(), "politeproxy_host_waiting", host=SLOW)))

    fast_url = "http://%s:%d/f" % (FAST, origin.port)
    t0 = time.monotonic()
    par = H.concurrent(proxy, [fast_url + "?p=%d" % i for i in range(6)], timeout=10)
    seq = [H.request(proxy, fast_url + "?s=%d" % i, timeout=10) for i in range(4)]
    took = time.monotonic() - t0
    for r in par + seq:
        H.log("fast request %s" % r)
    bad = [r for r in par + seq if r.error or r.status != 200]
    H.check(not bad, "requests to %s failed while %s was busy: %s" % (FAST, SLOW, bad))
    slow_ones = [r for r in par + seq if r.elapsed >= 1.0]
    H.check(not slow_ones, "requests to %s took >= 1 s while %s's queue was full: %s"
            % (FAST, SLOW, slow_ones))
    st = origin.host(SLOW)
    H.check(st["count"] == 1 and st["in_flight"] == 1,
            "expected the slow host still busy with its first request while the fast"
            " host was served (%.2fs), origin saw %s" % (took, H.brief(st)))
    H.check(st["peak"] == 1, "slow host peak %d, limit 1" % st["peak"])
    for c in slow_clients:
        c.close()


if __name__ == "__main__":
    H.main(test, timeout=40)
