#!/usr/bin/python3
"""concurrency 10, rate 5/s, burst 1: 11 fast requests sent at once reach the origin
spaced by the token bucket, ~0.2 s apart (>= 0.17 s between consecutive arrivals)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "paced.test"
N = 11
MIN_GAP = 0.17


def test(t):
    origin = t.origin()
    cfg = H.base_config(hosts={HOST: {"concurrency": 10, "rate": 5, "burst": 1,
                                      "reason": "integration test: rate spacing"}})
    proxy = t.proxy(cfg)
    url = "http://%s:%d/fast" % (HOST, origin.port)
    results = H.concurrent(proxy, [url + "?i=%d" % i for i in range(N)], timeout=20)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests did not get 200: %s" % (len(bad), bad[:5]))
    arr = sorted(origin.host(HOST)["arrivals"])
    H.check(len(arr) == N, "origin saw %d arrivals for %s, expected %d"
            % (len(arr), HOST, N))
    gaps = [b - a for a, b in zip(arr, arr[1:])]
    H.log("gaps between arrivals: %s" % ", ".join("%.3f" % g for g in gaps))
    H.check(min(gaps) >= MIN_GAP,
            "arrivals closer than %.2fs with rate 5/s burst 1: gaps %s"
            % (MIN_GAP, ["%.3f" % g for g in gaps]))
    span = arr[-1] - arr[0]
    H.check(span < 4.0, "11 arrivals spread over %.2fs, expected ~2 s at 5/s" % span)


if __name__ == "__main__":
    H.main(test, timeout=40)
