#!/usr/bin/python3
"""10 requests that each take 1 s at the origin, concurrency 2, rate 100/s: the batch
takes at least 5 s (five rounds of two) and not absurdly longer (< 9 s)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "slowresp.test"
N = 10


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    url = "http://%s:%d/x?delay=1" % (HOST, origin.port)
    t0 = time.monotonic()
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(N)], timeout=30)
    elapsed = time.monotonic() - t0
    H.log("batch of %d took %.2fs: %s" % (N, elapsed, H.summarize(results)))
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests did not get 200: %s" % (len(bad), bad[:5]))
    st = origin.host(HOST)
    H.check(st["peak"] <= 2, "origin saw %d in flight at once for %s (limit 2)"
            % (st["peak"], HOST))
    # each of the 2 slots serves 5 requests of >= 1 s each
    H.check(elapsed >= 4.95, "batch took %.2fs, expected >= 5 s with concurrency 2"
            % elapsed)
    H.check(elapsed < 9.0, "batch took %.2fs, expected < 9 s (5 rounds of 1 s)" % elapsed)


if __name__ == "__main__":
    H.main(test, timeout=45)
