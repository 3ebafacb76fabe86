#!/usr/bin/python3
"""While 8 slow requests (2 s each) run at concurrency 2, /metrics shows
host_in_flight 2 and host_waiting 6 for the host; after they finish both are 0 (or the
host's series are gone)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "gauges.test"
N = 8


def gauges(proxy):
    m = proxy.metrics()
    return (H.mget(m, "politeproxy_host_in_flight", host=HOST),
            H.mget(m, "politeproxy_host_waiting", host=HOST), m)


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=2, rate=100, burst=100))
    proxy.metrics()  # parses before any traffic
    H.check(proxy.admin_get("/healthz")[0] == 200, "GET /healthz did not answer 200")

    url = "http://%s:%d/g?delay=2" % (HOST, origin.port)
    bg = H.Background(proxy, [url + "&i=%d" % i for i in range(N)], timeout=30)
    H.wait_until(lambda: origin.host(HOST)["in_flight"] == 2, 1.5)
    seen = []

    def ok():
        g = gauges(proxy)
        seen.append(g[:2])
        return g[0] == 2 and g[1] == 6

    H.wait_until(ok, 1.5, interval=0.05)
    inf, wait, m = gauges(proxy)
    H.log("during: in_flight=%s waiting=%s (origin in_flight=%d)"
          % (inf, wait, origin.host(HOST)["in_flight"]))
    H.check(inf == 2 and wait == 6,
            "while 8 requests run at concurrency 2 expected politeproxy_host_in_flight"
            "{host=%s} 2 and politeproxy_host_waiting 6, saw %s; series for the host:\n%s"
            % (HOST, sorted(set(seen)), "\n".join(
                "%s%s %s" % (n, dict(ls), v) for (n, ls), v in sorted(m.items())
                if dict(ls).get("host") == HOST)))
    tracked = H.mget(m, "politeproxy_hosts_tracked")
    H.check(tracked is not None and tracked >= 1,
            "politeproxy_hosts_tracked is %r while a host is busy" % tracked)

    results = bg.wait(40)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests did not get 200: %s" % (len(bad), bad[:5]))
    H.check(origin.host(HOST)["peak"] == 2, "origin peak %d, expected 2"
            % origin.host(HOST)["peak"])

    def idle():
        g = gauges(proxy)
        return (g[0] in (None, 0)) and (g[1] in (None, 0)) and g
    H.wait_until(idle, 3.0, interval=0.05)
    inf, wait, m = gauges(proxy)
    H.log("after: in_flight=%s waiting=%s" % (inf, wait))
    H.check(inf in (None, 0) and wait in (None, 0),
            "after all requests finished expected host_in_flight 0 and host_waiting 0 "
            "for %s (or no series), saw in_flight=%s waiting=%s" % (HOST, inf, wait))
    ok_total = H.msum(m, "politeproxy_requests_total", host=HOST)
    H.log("requests_total for host: %s" % ok_total)


if __name__ == "__main__":
    H.main(test, timeout=45)
