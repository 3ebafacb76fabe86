#!/usr/bin/python3
"""Fleet store outages: the bound holds without the store, and comes back with it.

1. local_share: 2 proxies (concurrency 2, expected_workers 2) each send 12 requests of
   0.4 s; the redis-server is killed (SIGKILL) mid-run. Every request is answered 200,
   the origin never sees more than 2 at once (each process takes 2/2 = 1, after a hold
   for what the other held), and fleet_store_up goes to 0 on both.
2. The store restarts on the same port (empty): both processes rejoin within seconds
   (fleet_store_up 1, leases of running requests re-asserted), one process alone then
   reaches 2 in flight (the fleet's bound, not its local share of 1), and both together
   never exceed 2.
3. A hung store (SIGSTOP): a request is answered within fleet.timeout plus a little,
   not held until the store wakes; SIGCONT, and the processes rejoin.
4. fail_closed: with the store down, a proxy answers 503 with Retry-After and
   Proxy-Status error=proxy_internal_error.
--store cluster|sentinel runs the same against a Redis Cluster of 3 masters or a master
and replica behind 3 sentinels (fleet_common.make_store; kill/pause act on every data node)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fleet_common import fleet_config, make_store  # noqa: E402


def store_up(proxy):
    return H.mget(H.parse_metrics(proxy.metrics_text()), "politeproxy_fleet_store_up")


def send_all(jobs, timeout=60):
    """jobs: [(proxy, [urls])] at once; the results, in order."""
    out = [None] * len(jobs)

    def one(i, proxy, urls):
        out[i] = H.concurrent(proxy, urls, timeout=timeout)

    threads = [threading.Thread(target=one, args=(i, p, u)) for i, (p, u) in enumerate(jobs)]
    for th in threads:
        th.start()
    return threads, out


def all_ok(results, what):
    for res in results:
        bad = [r for r in res if r.error or r.status != 200]
        H.check(not bad, "%s: %d requests not answered 200: %s" % (what, len(bad), bad[:3]))


def test(t):
    store = make_store(t)
    origin = t.origin()
    a = t.proxy(fleet_config(store), name="A")
    b = t.proxy(fleet_config(store), name="B")

    # 1. The store dies mid-run.
    host = "outage.test"
    url = "http://%s:%d/x?delay=0.4" % (host, origin.port)
    threads, results = send_all([(a, [url + "&a=%d" % i for i in range(12)]),
                                 (b, [url + "&b=%d" % i for i in range(12)])])
    time.sleep(1.0)
    store.kill()
    killed = time.monotonic()
    for th in threads:
        th.join(60)
    all_ok(results, "store killed mid-run")
    st = origin.host(host)
    H.log("store killed: origin peak %d over %d requests; done %.1f s after the kill"
          % (st["peak"], st["count"], time.monotonic() - killed))
    H.check(st["peak"] <= 2, "origin saw %d at once with the store gone: the bound is 2 (2 processes x 2/2)"
            % st["peak"])
    H.check(store_up(a) == 0 and store_up(b) == 0, "fleet_store_up is not 0 with the store killed")
    m = H.parse_metrics(a.metrics_text())
    H.check(H.mget(m, "politeproxy_fleet_degraded_seconds_total", 0) > 0, "fleet_degraded_seconds_total did not grow")

    # 2. The store comes back, empty, on the same port.
    store.start()
    back = time.monotonic()
    rejoined = H.wait_until(lambda: store_up(a) == 1 and store_up(b) == 1, timeout=10)
    H.check(rejoined, "the processes did not rejoin the store within 10 s")
    H.log("rejoined %.2f s after the store restarted" % (time.monotonic() - back))
    host = "rejoin.test"
    url = "http://%s:%d/x?delay=0.3" % (host, origin.port)
    threads, results = send_all([(a, [url + "&solo=%d" % i for i in range(8)])])
    threads[0].join(60)
    all_ok(results, "one process after the rejoin")
    H.check(origin.host(host)["peak"] == 2, "one process alone reached %d in flight after the rejoin, "
            "expected the fleet's 2 (1 would be its local share)" % origin.host(host)["peak"])
    origin.reset()
    threads, results = send_all([(a, [url + "&a=%d" % i for i in range(12)]),
                                 (b, [url + "&b=%d" % i for i in range(12)])])
    for th in threads:
        th.join(60)
    all_ok(results, "both processes after the rejoin")
    H.check(origin.host(host)["peak"] == 2, "after the rejoin the origin's peak was %d, expected the bound 2"
            % origin.host(host)["peak"])

    # 3. A hung store.
    store.pause()
    started = time.monotonic()
    r = H.request(a, "http://hung.test:%d/x" % origin.port, timeout=10)
    took = time.monotonic() - started
    H.log("store hung (SIGSTOP): answered %s in %.2f s (fleet.timeout 0.3 s)" % (r.status, took))
    H.check(r.status == 200, "with the store hung: %s" % r)
    H.check(took < 0.3 + 0.5, "a request took %.2f s with the store hung: more than fleet.timeout + 0.5 s" % took)
    store.resume()
    H.check(H.wait_until(lambda: store_up(a) == 1, timeout=10), "A did not rejoin after SIGCONT")

    # 4. fail_closed.
    c = t.proxy(fleet_config(store, on_store_failure="fail_closed"), name="C")
    r = H.request(c, "http://closed.test:%d/x" % origin.port)
    H.check(r.status == 200, "fail_closed with the store up: %s" % r)
    store.kill()
    H.check(H.wait_until(lambda: store_up(c) == 0, timeout=5), "C did not notice the store going away")
    r = H.request(c, "http://closed.test:%d/x" % origin.port)
    H.log("fail_closed, store down: %s Retry-After=%s Proxy-Status=%s"
          % (r.status, r.header("Retry-After"), r.header("Proxy-Status")))
    H.check(r.status == 503, "fail_closed with the store down answered %s, expected 503" % r.status)
    H.check(r.header("Retry-After"), "the 503 has no Retry-After")
    H.check("error=proxy_internal_error" in (r.header("Proxy-Status") or ""),
            "Proxy-Status %r lacks error=proxy_internal_error" % r.header("Proxy-Status"))


if __name__ == "__main__":
    H.main(test, timeout=55)
