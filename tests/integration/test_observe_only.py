#!/usr/bin/python3
"""enforce: false (observe-only): with concurrency 2 and rate 1, a burst of 20 slow
requests (0.5 s each) is forwarded at once (origin peak >= 15, the whole burst done in
< 2 s), and politeproxy_would_have_waited_total{host} counts the >= 18 requests the
limits would have parked. The same burst to a host that keeps enforce: true (an
override in the same file) still sees at most 2 in flight."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "observe.test"
ENFORCED = "enforced.test"
N = 20


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=2, rate=1, burst=1, enforce=False,
                                  hosts={ENFORCED: {"enforce": True}}))
    m = proxy.metrics()
    H.check(not H.mseries(m, "politeproxy_would_have_waited_total") or
            H.msum(m, "politeproxy_would_have_waited_total") == 0,
            "would_have_waited_total is non-zero before any traffic")

    url = "http://%s:%d/o?delay=0.5" % (HOST, origin.port)
    t0 = time.monotonic()
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(N)], timeout=20)
    took = time.monotonic() - t0
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests did not get 200: %s" % (len(bad), bad[:5]))
    st = origin.host(HOST)
    H.log("observe-only burst: %d requests in %.2fs, origin peak %d"
          % (N, took, st["peak"]))
    H.check(st["count"] == N, "origin saw %d requests, expected %d" % (st["count"], N))
    H.check(st["peak"] >= 15,
            "enforce: false should forward the burst at once: origin peak %d (limits:"
            " concurrency 2, rate 1)" % st["peak"])
    H.check(took < 2.0, "the observe-only burst of %d 0.5 s requests took %.2fs" % (N, took))

    m = proxy.metrics()
    waited = H.mget(m, "politeproxy_would_have_waited_total", host=HOST)
    H.log("would_have_waited_total{host=%s} = %s" % (HOST, waited))
    H.check(waited is not None and N - 2 <= waited <= N,
            "politeproxy_would_have_waited_total{host=%s} is %s; concurrency 2 and rate 1"
            " would have parked at least %d of %d; series: %s"
            % (HOST, waited, N - 2, N, H.mseries(m, "politeproxy_would_have_waited_total")))

    # a host that enforces (per-host enforce: true over defaults enforce: false)
    url = "http://%s:%d/e?delay=0.5" % (ENFORCED, origin.port)
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(4)], timeout=20)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests to %s did not get 200: %s" % (len(bad), ENFORCED, bad))
    st = origin.host(ENFORCED)
    H.log("enforced host: origin peak %d" % st["peak"])
    H.check(st["peak"] <= 2, "host %s with enforce: true had %d in flight at the origin,"
            " concurrency is 2" % (ENFORCED, st["peak"]))
    m = proxy.metrics()
    w2 = H.mget(m, "politeproxy_would_have_waited_total", host=ENFORCED)
    H.check(w2 in (None, 0), "would_have_waited_total{host=%s} is %s for an enforcing host"
            % (ENFORCED, w2))


if __name__ == "__main__":
    H.main(test, timeout=30)
