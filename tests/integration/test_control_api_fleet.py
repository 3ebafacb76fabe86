#!/usr/bin/python3
"""The control API with a fleet: overrides live in the Redis store and reach every process.

A: a pause put through process A reaches process B within 1 s, measured from A's 200 to
   the moment B's own gate holds it (B's /api/hosts/{key} shows it; polled every 10 ms);
   both queues are held (the origin sees nothing from either) until the pause ends, then
   both go. The figure is logged ("fleet reach: ...").
   A pause-only override ends with its pause, everywhere.
B: a DELETE through B of an override put through A reaches A the same way.
C: an override with expires_in 1s disappears everywhere by itself (A, B, and the store).
D: the store restarts empty: the processes put back what they know (the store holds the
   override again), and a process started after that learns it from the store.
--store cluster|sentinel runs the same against a Redis Cluster of 3 masters or a master
and replica behind 3 sentinels (fleet_common.make_store; kill/pause act on every data node).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import redis_store  # noqa: E402
from control_api import api, token_file  # noqa: E402
from fleet_common import fleet_config, make_store  # noqa: E402

REACH = 1.0


def seen_by(proxy, key):
    """Whether `proxy` shows an API override of `key` (for a tracked host: its gate's)."""
    status, _, body = api(proxy, "GET", "/api/hosts/" + key, token=None)
    return status == 200 and body.get("override_source") == "api"


def reach(proxy, key, present, timeout=5.0):
    """Seconds until `proxy` shows `key`'s override (or its absence)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if seen_by(proxy, key) == present:
            return time.monotonic() - t0
        time.sleep(0.01)
    return None


def store_keys(store):
    return sorted(k.decode() for k in store.client().keys("pp:*override*"))


def test(t):
    if not redis_store.available():
        print("SKIP: no redis-server")
        return
    store = make_store(t)
    origin = t.origin()
    port = origin.port
    cfg = fleet_config(store, concurrency=4, defaults={"queue": {"max_wait": "10s"}})
    cfg["admin"] = {"token_file": token_file(t.workdir)}
    a = t.proxy(cfg, name="a")
    b = t.proxy(cfg, name="b")

    # A: both processes track held.test first, so B's answer below is its gate's own state.
    for p in (a, b):
        r = H.request(p, "http://held.test:%d/warm" % port)
        H.check(r.status == 200, "the warm-up through %s: %s" % (p.name, r))
    origin.reset()
    status, _, body = api(a, "PUT", "/api/hosts/held.test/override", {"pause_for": "3s", "reason": "too hard"})
    t0 = time.monotonic()
    H.check(status == 200, "the pause through A: %s %s" % (status, body))
    took = reach(b, "held.test", True)
    H.log("fleet reach: B applied A's pause %.0f ms after A's 200" % ((took or 99) * 1000))
    H.check(took is not None and took <= REACH, "B applied A's pause after %s s (bound %s s)" % (took, REACH))
    bg = H.Background(a, ["http://held.test:%d/a?i=%d" % (port, i) for i in range(2)], timeout=30)
    bg2 = H.Background(b, ["http://held.test:%d/b?i=%d" % (port, i) for i in range(2)], timeout=30)
    time.sleep(1.0)
    H.check(origin.host("held.test")["count"] == 0, "the origin saw held.test during the fleet's pause")
    results = bg.wait(30) + bg2.wait(30)
    H.check(all(r.status == 200 for r in results), "after the pause: %s" % H.summarize(results))
    first = min(r["start"] for r in origin.host("held.test")["requests"])
    H.check(first - t0 >= 2.7, "held.test reached the origin %.2fs into a 3s pause" % (first - t0))

    H.check(not seen_by(a, "held.test") and not seen_by(b, "held.test"),
            "a pause-only override ends with its pause, everywhere")

    # B
    status, _, body = api(a, "PUT", "/api/hosts/capped.test/override", {"concurrency": 1})
    H.check(status == 200 and reach(b, "capped.test", True) is not None, "capped.test through A: %s" % body)
    status, _, body = api(b, "DELETE", "/api/hosts/capped.test/override")
    H.check(status == 200, "DELETE through B: %s %s" % (status, body))
    took = reach(a, "capped.test", False)
    H.check(took is not None and took <= REACH, "A dropped the override %s s after B's DELETE" % took)

    # C
    status, _, body = api(a, "PUT", "/api/hosts/brief.test/override", {"concurrency": 1, "expires_in": "1s"})
    H.check(status == 200 and reach(b, "brief.test", True) is not None, "brief.test through A: %s" % body)
    time.sleep(1.5)
    H.check(not seen_by(a, "brief.test") and not seen_by(b, "brief.test"),
            "an expired override is still shown")
    H.check(not [k for k in store_keys(store) if "brief.test" in k and "changes" not in k and "version" not in k],
            "the store still holds brief.test: %s" % store_keys(store))

    # D
    status, _, body = api(a, "PUT", "/api/hosts/kept.test/override", {"rate": 0.5, "reason": "slow host"})
    H.check(status == 200 and reach(b, "kept.test", True) is not None, "kept.test: %s" % body)
    store.kill()
    store.start()
    H.wait_until(lambda: any("kept.test" in k for k in store_keys(store)), 10, what="the override put back")
    c = t.proxy(cfg, name="c")
    H.check(reach(c, "kept.test", True) is not None, "a process started after the store came back: no kept.test")


if __name__ == "__main__":
    H.main(test, timeout=90)
