#!/usr/bin/python3
"""50 concurrent requests to one host with concurrency 2 (each takes 0.2 s at the
origin): all get 200 and the origin never sees more than 2 at once, and does see 2."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "bound.test"
N = 50


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    url = "http://%s:%d/slow?delay=0.2" % (HOST, origin.port)
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(N)], timeout=30)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d of %d requests did not get 200: %s (summary %s)"
            % (len(bad), N, bad[:5], H.summarize(results)))
    st = origin.host(HOST)
    H.log("origin saw: peak=%d count=%d completed=%d"
          % (st["peak"], st["count"], st["completed"]))
    H.check(st["count"] == N, "origin received %d requests for %s, expected %d"
            % (st["count"], HOST, N))
    H.check(st["peak"] == 2, "origin's peak in-flight for %s was %d, expected exactly 2"
            % (HOST, st["peak"]))
    ps = [r.header("Proxy-Status") for r in results]
    H.check(all(p and "politeproxy" in p and "queue-wait=" in p for p in ps),
            "origin responses lack 'Proxy-Status: politeproxy; queue-wait=...': %r"
            % [p for p in ps if not (p and "queue-wait=" in p)][:3])


if __name__ == "__main__":
    H.main(test, timeout=45)
