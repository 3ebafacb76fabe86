#!/usr/bin/python3
"""Fleet: one bound per host across processes. 2 proxies with concurrency 2, then 4
proxies with concurrency 3, all sharing one redis-server: 12 requests through each
proxy at once (0.3 s each at the origin) -> all 200, and the origin's own peak for the
host equals the bound exactly (without the fleet it would be 2 x 2 and 4 x 3). /hosts
shows the fleet-wide in-flight count next to the local one, and both processes served
some of the requests (the fleet's queue takes the processes in turn).
--store cluster|sentinel runs the same against a Redis Cluster of 3 masters or a master
and replica behind 3 sentinels (fleet_common.make_store; kill/pause act on every data node)."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fleet_common import make_store  # noqa: E402


def fleet_config(store, concurrency, **fleet):
    cfg = H.base_config(concurrency=concurrency, rate=100, burst=100,
                        adaptive={"enabled": False})
    cfg["fleet"] = dict({"redis": store.url, "lease_ttl": "3s", "expected_workers": 2,
                         "timeout": "500ms"}, **fleet)
    return cfg


def run_round(t, store, origin, processes, concurrency, host):
    proxies = [t.proxy(fleet_config(store, concurrency), name="%s-p%d" % (host.split(".")[0], i))
               for i in range(processes)]
    url = "http://%s:%d/slow?delay=0.3" % (host, origin.port)
    results = [None] * processes
    seen_fleet = []

    def one(i):
        results[i] = H.concurrent(proxies[i], [url + "&p=%d&i=%d" % (i, k) for k in range(12)], timeout=60)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(processes)]
    for th in threads:
        th.start()
    # While they run, /hosts shows the fleet's count next to the local one.
    def fleet_seen():
        h = proxies[0].hosts().get(host)
        if h and h["fleet_in_flight"]:
            seen_fleet.append(h)
        return seen_fleet
    H.wait_until(fleet_seen, timeout=10)
    for th in threads:
        th.join()
    for i, res in enumerate(results):
        bad = [r for r in res if r.error or r.status != 200]
        H.check(not bad, "proxy %d: %d of 12 requests did not get 200: %s" % (i, len(bad), bad[:3]))
    st = origin.host(host)
    H.log("%d processes, concurrency %d: origin peak=%d count=%d" % (processes, concurrency, st["peak"], st["count"]))
    H.check(st["count"] == 12 * processes, "origin saw %d requests, expected %d" % (st["count"], 12 * processes))
    H.check(st["peak"] == concurrency,
            "origin's peak in flight for %s was %d, expected exactly the fleet bound %d (not %d x %d)"
            % (host, st["peak"], concurrency, processes, concurrency))
    H.check(seen_fleet, "/hosts never showed a fleet_in_flight for %s" % host)
    H.log("/hosts while running: %s" % {k: seen_fleet[0][k] for k in ("in_flight", "fleet_in_flight", "waiting")})
    H.check(1 <= seen_fleet[0]["fleet_in_flight"] <= concurrency,
            "fleet_in_flight %r outside 1..%d" % (seen_fleet[0]["fleet_in_flight"], concurrency))
    m = H.parse_metrics(proxies[0].metrics_text())
    H.check(H.mget(m, "politeproxy_fleet_store_up") == 1, "fleet_store_up is not 1")
    for p in proxies:
        p.stop()


def test(t):
    store = make_store(t)
    origin = t.origin()
    run_round(t, store, origin, processes=2, concurrency=2, host="two.test")
    run_round(t, store, origin, processes=4, concurrency=3, host="four.test")


if __name__ == "__main__":
    H.main(test, timeout=90)
