#!/usr/bin/python3
"""Fleet behind Redis Sentinel (redis+sentinel://S1,S2,S3/pp-master): the proxies follow
a failover as soon as the sentinels announce it, and the bound holds throughout.

A master, its replica and 3 sentinels (down-after 1 s, quorum 2); 2 proxies on the
sentinel URL (concurrency 2, expected_workers 2, fleet.timeout 300 ms) under steady load
on 4 hosts (4 requests outstanding per host, 0.2 s each at the origin). The master is
SIGKILLed; the sentinels promote the replica and publish +switch-master. Each proxy's
fleet_store_up gauge (polled every 50 ms) drops to 0 and is back to 1 within the
sentinels' failover time (+switch-master minus the kill) plus 1 s. Every request is
answered (200, or 503 with Retry-After: counted), and the origin's peak per host is 2
before the kill and never above 2 during or after it. The figures are logged
("sentinel failover: ...").
Then the old master comes back (a replica) and SENTINEL FAILOVER hands the master role
back while both stay up: nothing breaks the proxies' connections, so they must follow
the +switch-master announcement (their logs say so) within 1 s of it, every request
answered, the peak still 2 at most."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import redis_sentinel  # noqa: E402
from fleet_common import Streams, check_answered, fleet_config, records, store_up  # noqa: E402

BOUND = 2
HOSTS = ["s%d.sentinel.test" % i for i in range(4)]
SLACK = 1.0


class GaugeWatch:
    """Polls each proxy's fleet_store_up every 50 ms in a thread: [(time.monotonic(), value)]."""

    def __init__(self, proxies):
        self.samples = {p.name: [] for p in proxies}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(p,), daemon=True) for p in proxies]
        for th in self._threads:
            th.start()

    def _run(self, proxy):
        while not self._stop.is_set():
            try:
                v = store_up(proxy)
            except Exception:  # noqa: BLE001 - an admin answer missed is a gap in the samples
                v = None
            self.samples[proxy.name].append((time.monotonic(), v))
            self._stop.wait(0.05)

    def back_up(self, name, since):
        """(first 0 after `since`, first 1 after the last 0) for one proxy; None where not seen."""
        s = [(t, v) for t, v in self.samples[name] if t >= since]
        zeros = [t for t, v in s if v == 0]
        if not zeros:
            return None, None
        ones = [t for t, v in s if v == 1 and t > zeros[-1]]
        return zeros[0], (ones[0] if ones else None)

    def stop(self):
        self._stop.set()
        for th in self._threads:
            th.join(5)


def test(t):
    if not redis_sentinel.available():
        print("SKIP: no redis-server")
        return
    sentinels = t.redis_sentinel()
    origin = t.origin()
    cfg = fleet_config(sentinels, concurrency=BOUND, lease_ttl="3s", timeout="300ms", expected_workers=2)
    proxies = [t.proxy(cfg, name="A"), t.proxy(cfg, name="B")]
    H.check(H.wait_until(lambda: all(store_up(p) == 1 for p in proxies), timeout=10),
            "the proxies did not join the store through the sentinels: fleet_store_up %s"
            % [store_up(p) for p in proxies])
    load = Streams(origin, [(p, h) for p in proxies for h in HOSTS], per=2, delay=0.2, tag="steady", duration=25)
    time.sleep(2.0)
    watch = GaugeWatch(proxies)
    killed = sentinels.kill_master()
    try:
        new_port, switched = sentinels.wait_promotion(timeout=15)
        failover = switched - killed
        H.wait_until(lambda: all(watch.back_up(p.name, killed)[1] for p in proxies), timeout=failover + SLACK + 5,
                     interval=0.05)
        time.sleep(2.0)  # load goes on after the failover
    finally:
        watch.stop()
        results = load.stop()
    figures = {p.name: watch.back_up(p.name, killed) for p in proxies}
    H.log("sentinel failover: +switch-master %.2f s after the kill (new master %d); fleet_store_up per proxy: %s"
          % (failover, new_port, {n: "0 at %s, 1 again at %s (s after the kill)"
                                  % tuple("%.2f" % (x - killed) if x else "never" for x in f)
                                  for n, f in figures.items()}))
    check_answered(results, "steady load through the failover")
    for name, (down, up) in figures.items():
        H.check(down is not None, "%s: fleet_store_up never went to 0 with the master killed" % name)
        H.check(up is not None, "%s: fleet_store_up not back to 1 within %.1f s of the kill"
                % (name, failover + SLACK + 5))
        H.check(up - killed <= failover + SLACK,
                "%s: fleet_store_up back to 1 %.2f s after the kill, %.2f s after +switch-master "
                "(allowed: the failover %.2f s + %.1f s)" % (name, up - killed, up - switched, failover, SLACK))
    for h in HOSTS:
        recs = records(origin, h, "tag=steady&")
        before = H.overlap_peak([r for r in recs if r["start"] < killed])
        after = H.overlap_peak([r for r in recs if r["end"] is None or r["end"] >= killed])
        H.log("%s: origin peak %d before the kill, %d during and after it" % (h, before, after))
        H.check(before == BOUND, "%s: peak %d before the kill with 4 requests outstanding, expected %d"
                % (h, before, BOUND))
        H.check(after <= BOUND, "%s: %d at the origin at once during or after the failover, bound %d"
                % (h, after, BOUND))


    graceful(sentinels, origin, proxies)


def graceful(sentinels, origin, proxies):
    sentinels.start()  # the old master back, as a replica
    H.check(H.wait_until(lambda: all(store_up(p) == 1 for p in proxies), timeout=10), "the proxies lost the store")
    load = Streams(origin, [(p, h) for p in proxies for h in HOSTS], per=2, delay=0.2, tag="handover", duration=20)
    time.sleep(1.0)
    asked = sentinels.failover()
    try:
        new_port, switched = sentinels.wait_promotion(timeout=15)
        followed = H.wait_until(lambda: all(any("(+switch-master)" in line and str(new_port) in line
                                                for line in list(p.lines)) for p in proxies), timeout=5, interval=0.05)
        back = H.wait_until(lambda: all(store_up(p) == 1 for p in proxies), timeout=5, interval=0.05)
        back_at = time.monotonic()
        time.sleep(1.5)
    finally:
        results = load.stop()
    H.log("graceful failover: +switch-master %.2f s after SENTINEL FAILOVER (master now %d); both proxies "
          "followed the announcement: %s; fleet_store_up 1 on both %.2f s after it"
          % (switched - asked, new_port, followed, back_at - switched))
    H.check(followed, "a proxy did not follow +switch-master to %d:\n%s" % (new_port, proxies[0].tail(20)))
    H.check(back and back_at - switched <= SLACK, "fleet_store_up not back on both within %.1f s of +switch-master"
            % SLACK)
    check_answered(results, "steady load through the handover")
    for h in HOSTS:
        peak = H.overlap_peak(records(origin, h, "tag=handover&"))
        H.check(peak <= BOUND, "%s: %d at the origin at once around the handover, bound %d" % (h, peak, BOUND))


if __name__ == "__main__":
    H.main(test, timeout=90)
