#!/usr/bin/python3
"""State made during a fleet store outage gets the outage's rules, and every request is
counted once, under its real outcome.

1. A process that starts while its store is down (expected_workers 2, concurrency 4):
   a host it sees for the first time is served at the local share (4/2 = 2 at the
   origin), not at the full limit, as a host that lived through the outage would be.
2. The store is killed under a running process: a host first seen afterwards gets the
   share too (the origin's peak is 2, not 4).
3. Accounting with a fleet (store up): requests that park (quick path missed, then a
   lease) are counted as ok, never as error; a queue timeout while waiting for a lease
   is counted once, as rejected (not rejected + error).
4. fail_closed with the store down: each refused request is counted once, as rejected.
--store cluster|sentinel runs the same against a Redis Cluster of 3 masters or a master
and replica behind 3 sentinels (fleet_common.make_store; kill/pause act on every data node)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fleet_common import fleet_config, make_store  # noqa: E402


def outcomes(proxy, host):
    m = H.parse_metrics(proxy.metrics_text())
    out = {}
    for (name, labels), v in m.items():
        d = dict(labels)
        if name == "politeproxy_requests_total" and d.get("host") == host:
            out[d["outcome"]] = out.get(d["outcome"], 0) + v
    return {k: int(v) for k, v in out.items() if v}


def store_up(proxy):
    return H.mget(H.parse_metrics(proxy.metrics_text()), "politeproxy_fleet_store_up")


def test(t):
    origin = t.origin()
    store = make_store(t)

    # 1. Started while the store is down.
    store.kill()
    a = t.proxy(fleet_config(store, concurrency=4), name="A")
    H.check(store_up(a) == 0, "fleet_store_up is not 0 with the store down at start")
    host = "born-in-outage.test"
    res = H.concurrent(a, ["http://%s:%d/x?delay=0.4&i=%d" % (host, origin.port, i) for i in range(10)], timeout=30)
    H.check(all(r.status == 200 for r in res), "not all answered 200: %s" % [r.status for r in res])
    peak = origin.host(host)["peak"]
    H.log("started with the store down: origin peak %d (concurrency 4, expected_workers 2)" % peak)
    H.check(peak <= 2, "a host first seen during the outage reached %d in flight from one process; "
            "its local share is 4/2 = 2" % peak)

    # 2. The store goes away under a running process; a new host appears.
    store.start()
    H.check(H.wait_until(lambda: store_up(a) == 1, timeout=10), "A did not join the store once it came up")
    store.kill()
    H.check(H.wait_until(lambda: store_up(a) == 0, timeout=5), "A did not notice the store going away")
    host = "new-after-kill.test"
    res = H.concurrent(a, ["http://%s:%d/x?delay=0.4&i=%d" % (host, origin.port, i) for i in range(10)], timeout=30)
    H.check(all(r.status == 200 for r in res), "not all answered 200: %s" % [r.status for r in res])
    peak = origin.host(host)["peak"]
    H.log("store killed, then a new host: origin peak %d" % peak)
    H.check(peak <= 2, "a host first seen after the store went away reached %d in flight; the share is 2" % peak)

    # 3. Accounting with the store up: two processes share a bound of 1, so a request of
    # B waits for its lease while D holds the fleet's one slot.
    store.start()
    cfg = fleet_config(store, concurrency=1, defaults={"queue": {"max_wait": "1s"}})
    b = t.proxy(cfg, name="B")
    d = t.proxy(cfg, name="D")
    H.check(H.wait_until(lambda: store_up(b) == 1 and store_up(d) == 1, timeout=10), "B and D did not join the store")

    def while_d_holds(host, hold, urls):
        """D holds `host`'s fleet slot for `hold` seconds while B sends `urls`; B's results."""
        busy = H.Background(d, ["http://%s:%d/x?delay=%s&holder=1" % (host, origin.port, hold)])
        H.check(H.wait_until(lambda: origin.host(host)["in_flight"] == 1, timeout=3), "D's request did not start")
        res = H.concurrent(b, urls, timeout=30)
        busy.wait(30)
        return res

    host = "parked.test"
    res = while_d_holds(host, 0.5, ["http://%s:%d/x?i=%d" % (host, origin.port, i) for i in range(3)])
    H.check(all(r.status == 200 for r in res), "requests that waited for a lease: %s" % [r.status for r in res])
    H.wait_until(lambda: outcomes(b, host).get("ok", 0) == 3, timeout=3)
    got = outcomes(b, host)
    H.log("3 requests that waited for a lease held elsewhere: %s" % got)
    H.check(got == {"ok": 3}, "3 requests that waited for their lease and were answered 200 counted as %s, "
            "expected ok=3 alone" % got)
    host = "timeout.test"
    res = while_d_holds(host, 2.5, ["http://%s:%d/x?i=%d" % (host, origin.port, i) for i in range(3)])
    statuses = [r.status for r in res]
    H.check(statuses == [503] * 3, "lease waits past max_wait (1 s) answered %s, expected 503 each" % statuses)
    H.wait_until(lambda: sum(outcomes(b, host).values()) >= 3, timeout=3)
    time.sleep(0.2)
    got = outcomes(b, host)
    H.log("3 lease waits past max_wait: %s" % got)
    H.check(got == {"rejected": 3}, "3 lease timeouts counted as %s, expected rejected=3 alone" % got)

    # 4. fail_closed: refusals are counted once, as rejected.
    c = t.proxy(fleet_config(store, on_store_failure="fail_closed"), name="C")
    H.check(H.wait_until(lambda: store_up(c) == 1, timeout=10), "C did not join the store")
    store.kill()
    H.check(H.wait_until(lambda: store_up(c) == 0, timeout=5), "C did not notice the store going away")
    host = "closed.test"
    for i in range(3):
        r = H.request(c, "http://%s:%d/x?i=%d" % (host, origin.port, i))
        H.check(r.status == 503, "fail_closed with the store down answered %s" % r.status)
    time.sleep(0.2)
    got = outcomes(c, host)
    H.log("3 fail_closed refusals: %s" % got)
    H.check(got == {"rejected": 3}, "3 fail_closed refusals counted as %s, expected rejected=3 alone" % got)


if __name__ == "__main__":
    H.main(test, timeout=55)
