#!/usr/bin/python3
"""Fleet leases live as long as their requests, and no longer than their process.

1. Renewal: with lease_ttl 1.5 s and concurrency 1, a request through proxy A that takes
   5 s at the origin keeps its lease (renewed every 0.5 s): a request through proxy B,
   sent 0.3 s later, reaches the origin only after A's has ended.
2. A crash: proxy A holds both slots (concurrency 2) with requests of 8 s; B's two
   requests wait. kill -9 of A: B's requests reach the origin once A's leases expire,
   between 1/2 x lease_ttl after the kill (A renewed them at most a third of the TTL
   before it died; the rest is the test's slack) and lease_ttl + 1 s.
--store cluster|sentinel runs the same against a Redis Cluster of 3 masters or a master
and replica behind 3 sentinels (fleet_common.make_store; kill/pause act on every data node)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fleet_common import fleet_config, make_store, records  # noqa: E402

TTL = 1.5


def renewal(t, a, b, origin):
    host = "renew.test"
    long_req = H.Background(a, ["http://%s:%d/x?delay=5&tag=long" % (host, origin.port)], timeout=30)
    H.check(H.wait_until(lambda: origin.host(host)["in_flight"] == 1, timeout=5), "A's long request never arrived")
    time.sleep(0.3)
    short_req = H.Background(b, ["http://%s:%d/x?tag=short" % (host, origin.port)], timeout=30)
    long_res, short_res = long_req.wait(30), short_req.wait(30)
    H.check(long_res[0].status == 200 and short_res[0].status == 200,
            "renewal: answers %s, %s" % (long_res[0], short_res[0]))
    long_rec, short_rec = records(origin, host, "tag=long")[0], records(origin, host, "tag=short")[0]
    H.log("renewal: long request %.2f-%.2f, short one arrived %.2f (lease_ttl %.1f s)"
          % (long_rec["start"], long_rec["end"], short_rec["start"], TTL))
    H.check(short_rec["start"] >= long_rec["end"] - 0.05,
            "B's request reached the origin %.2f s before A's 5 s request ended: A's lease was not renewed"
            % (long_rec["end"] - short_rec["start"]))
    H.check(origin.host(host)["peak"] == 1, "renew.test peak %d, bound 1" % origin.host(host)["peak"])


def crash(t, a, b, origin):
    host = "crash.test"
    H.Background(a, ["http://%s:%d/x?delay=8&tag=a%d" % (host, origin.port, i) for i in range(2)], timeout=30)
    H.check(H.wait_until(lambda: origin.host(host)["in_flight"] == 2, timeout=5), "A's two requests never arrived")
    waiting = H.Background(b, ["http://%s:%d/x?tag=b%d" % (host, origin.port, i) for i in range(2)], timeout=30)
    time.sleep(1.0)  # longer than a renewal period: A's leases were renewed at least once
    H.check(not records(origin, host, "tag=b"), "B's requests went while A held both slots")
    a.kill_now()
    killed = time.monotonic()
    res = waiting.wait(30)
    H.check(all(r.status == 200 for r in res), "B's answers after the crash: %s" % res)
    after = sorted(r["start"] - killed for r in records(origin, host, "tag=b"))
    H.log("crash: B's requests reached the origin %s s after kill -9 of A (lease_ttl %.1f s)"
          % (["%.2f" % x for x in after], TTL))
    H.check(after[0] >= TTL / 2, "B's first request went %.2f s after the crash, before A's leases could expire"
            % after[0])
    H.check(after[-1] <= TTL + 1.0, "B's requests went %.2f s after the crash: more than lease_ttl + 1 s" % after[-1])


def test(t):
    store = make_store(t)
    origin = t.origin()
    cfg = fleet_config(store, concurrency=2, hosts={"renew.test": {"concurrency": 1}})
    a = t.proxy(cfg, name="A")
    b = t.proxy(cfg, name="B")
    renewal(t, a, b, origin)
    crash(t, a, b, origin)
    m = H.parse_metrics(b.metrics_text())
    H.check(H.mget(m, "politeproxy_fleet_lease_lost_total") == 0, "B lost leases: %s"
            % H.mget(m, "politeproxy_fleet_lease_lost_total"))


if __name__ == "__main__":
    H.main(test, timeout=50)
