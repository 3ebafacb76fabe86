#!/usr/bin/python3
"""Fleet: one process's 429 pauses the host for every process. Proxies A and B stream
requests to one host; one request through A gets 429 with Retry-After: 3. From the
moment the origin sent that 429, no request for the host reaches the origin from either
process for 3 s (allowing 0.1 s for requests the fleet had already let go), and then
they resume. B adopted the collapse: its limit for the host is 1, its last change
"fleet".
--store cluster|sentinel runs the same against a Redis Cluster of 3 masters or a master
and replica behind 3 sentinels (fleet_common.make_store; kill/pause act on every data node)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fleet_common import fleet_config, make_store  # noqa: E402

HOST = "pause.test"
RETRY_AFTER = 3.0
SLACK = 0.1


def test(t):
    store = make_store(t)
    origin = t.origin()
    cfg = fleet_config(store, defaults={"backoff": {"initial": "100ms", "jitter": 0}})
    a = t.proxy(cfg, name="A")
    b = t.proxy(cfg, name="B")
    stop = time.monotonic() + 7.0
    url = "http://%s:%d/x?delay=0.05" % (HOST, origin.port)

    def stream(proxy, tag):
        i = 0
        while time.monotonic() < stop:
            H.request(proxy, url + "&%s=%d" % (tag, i), timeout=15)
            i += 1

    threads = [threading.Thread(target=stream, args=(p, "%s%d" % (p.name, k)), daemon=True)
               for p in (a, b) for k in range(2)]
    for th in threads:
        th.start()
    time.sleep(1.0)
    r = H.request(a, "http://%s:%d/x?status=429&retry_after=3&tag=throttle" % (HOST, origin.port))
    H.check(r.status == 429, "the throttling request answered %s" % r.status)
    b_host = H.wait_until(lambda: (b.hosts().get(HOST) or {}).get("paused_seconds", 0) > 0 and b.hosts()[HOST],
                          timeout=2)
    for th in threads:
        th.join(15)
    recs = origin.host(HOST)["requests"]
    throttled = [x for x in recs if "tag=throttle" in x["target"]][0]
    t429 = throttled["end"]
    during = [x["start"] - t429 for x in recs if t429 + SLACK < x["start"] < t429 + RETRY_AFTER]
    after = [x for x in recs if x["start"] >= t429 + RETRY_AFTER]
    before = [x for x in recs if x["start"] < throttled["start"]]
    H.log("%d requests before the 429, %d in the 3 s after it (beyond %.1f s of slack), %d after"
          % (len(before), len(during), SLACK, len(after)))
    H.check(len(before) > 10, "only %d requests before the 429: the streams did not run" % len(before))
    H.check(not during, "requests reached the origin %s s after the 429 (Retry-After: 3)"
            % ["%.2f" % d for d in during[:5]])
    H.check(any("B" in x["target"] for x in after) and any("A" in x["target"] for x in after),
            "both processes did not resume after the pause")
    H.check(b_host, "B never showed the host paused")
    H.log("B's view during the pause: limit=%s paused_seconds=%.2f last_change=%s"
          % (b_host["limit"], b_host["paused_seconds"], b_host["last_change"]))
    H.check(b_host["limit"] == 1 and b_host["last_change"]["reason"] == "fleet",
            "B did not adopt A's collapse: %s" % {k: b_host[k] for k in ("limit", "last_change")})


if __name__ == "__main__":
    H.main(test, timeout=40)
