#!/usr/bin/python3
"""SIGHUP reloads the config file the proxy was started with.

A: the file rewritten with an unknown key: the reload is rejected
   (config_reloads_total{result="failure"} 1), the proxy stays up and keeps serving on the
   old config (requests get 200, the origin still sees 2 in flight at concurrency 2).
B: the file rewritten with defaults.concurrency 1, SIGHUP while requests are in flight
   and parked: they all complete with 200; config_reloads_total{result="success"} 1;
   /hosts shows configured_limit 1; a batch of slow requests started after the reload
   reaches an origin peak of exactly 1.
C: a reload whose file does not come (the config path is a FIFO nobody writes yet): the
   proxy keeps accepting and answering (worker 0 runs the accept loop: reading the file
   there stalled every new connection); once the file comes, the reload applies."""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "reload.test"
N = 6


def reloads(proxy):
    m = proxy.metrics()
    return (H.mget(m, "politeproxy_config_reloads_total", 0.0, result="success"),
            H.mget(m, "politeproxy_config_reloads_total", 0.0, result="failure"))


def rewrite_and_hup(proxy, cfg):
    with open(proxy.config_path, "w") as f:
        f.write(cfg if isinstance(cfg, str) else H.dump_config(cfg))
    os.kill(proxy.pid, signal.SIGHUP)


def batch(proxy, origin, path, delay, n=N):
    origin.reset()
    url = "http://%s:%d%s?delay=%s" % (HOST, origin.port, path, delay)
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(n)], timeout=30)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%s: %d requests did not get 200: %s" % (path, len(bad), bad[:5]))
    st = origin.host(HOST)
    H.check(st["count"] == n, "%s: origin saw %d requests, expected %d"
            % (path, st["count"], n))
    return st["peak"]


def host_entry(proxy):
    status, _, body = proxy.admin_get("/hosts")
    H.check(status == 200, "GET /hosts answered %d" % status)
    hosts = json.loads(body.decode())
    found = [h for h in hosts if h.get("key") == HOST]
    H.check(found, "/hosts has no entry for %s: %s" % (HOST, body[:500]))
    return found[0]


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=2, rate=100, burst=100)
    proxy = t.proxy(cfg)
    H.check(reloads(proxy) == (0, 0), "config_reloads_total is %s before any SIGHUP"
            % (reloads(proxy),))
    peak = batch(proxy, origin, "/before", 0.3)
    H.check(peak == 2, "before any reload the origin peak was %d, expected 2" % peak)

    # ---- A: a broken file is rejected; the old config keeps serving ------------------
    broken = H.base_config(concurrency=1, rate=100, burst=100)
    broken["defaults"]["no_such_key"] = 7
    rewrite_and_hup(proxy, broken)
    got = H.wait_until(lambda: reloads(proxy)[1] >= 1, 3.0, interval=0.05)
    ok, failed = reloads(proxy)
    H.log("after SIGHUP with a broken file: reloads success=%s failure=%s alive=%s"
          % (ok, failed, proxy.alive()))
    H.check(proxy.alive(), "the proxy exited after SIGHUP with a broken file:\n%s"
            % proxy.tail())
    H.check(got and failed == 1 and ok == 0,
            "after SIGHUP with an unknown key expected config_reloads_total"
            "{result=\"failure\"} 1 and success 0, saw success=%s failure=%s" % (ok, failed))
    e = host_entry(proxy)
    H.check(e.get("configured_limit") == 2,
            "after a rejected reload /hosts shows configured_limit %r, expected 2 (old"
            " config): %s" % (e.get("configured_limit"), e))
    peak = batch(proxy, origin, "/after-broken", 0.3)
    H.log("after the rejected reload: origin peak %d" % peak)
    H.check(peak == 2, "after a rejected reload the old config (concurrency 2) should still"
            " apply, but the origin peak was %d" % peak)

    # ---- B: concurrency lowered from 2 to 1 ------------------------------------------
    origin.reset()
    url = "http://%s:%d/during?delay=1" % (HOST, origin.port)
    bg = H.Background(proxy, [url + "&i=%d" % i for i in range(4)], timeout=30)
    H.check(H.wait_until(lambda: origin.host(HOST)["in_flight"] == 2, 2.0),
            "2 of 4 slow requests never reached the origin at once: %s"
            % H.brief(origin.host(HOST)))
    lowered = H.base_config(concurrency=1, rate=100, burst=100)
    t_reload = time.monotonic()
    rewrite_and_hup(proxy, lowered)
    got = H.wait_until(lambda: reloads(proxy)[0] >= 1, 3.0, interval=0.05)
    ok, failed = reloads(proxy)
    H.log("after SIGHUP with concurrency 1: reloads success=%s failure=%s" % (ok, failed))
    H.check(got and ok == 1 and failed == 1,
            "after SIGHUP with a valid file expected config_reloads_total"
            "{result=\"success\"} 1 (failure still 1), saw success=%s failure=%s"
            % (ok, failed))
    e = host_entry(proxy)
    H.log("/hosts entry after the reload: %s" % e)
    H.check(e.get("configured_limit") == 1,
            "after the reload /hosts shows configured_limit %r for %s, expected 1: %s"
            % (e.get("configured_limit"), HOST, e))
    H.check(e.get("limit") == 1, "after the reload /hosts shows limit %r, expected 1: %s"
            % (e.get("limit"), e))
    results = bg.wait(30)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "requests in flight or parked across the reload: %d did not get 200:"
            " %s" % (len(bad), bad))
    recs = origin.host(HOST)["requests"]
    H.check(len(recs) == 4, "origin saw %d of the 4 requests sent across the reload"
            % len(recs))
    # the parked two leave one at a time, each only once nothing else is in flight
    for r in recs:
        if r["start"] > t_reload:
            busy = [o for o in recs if o is not r and o["start"] <= r["start"]
                    and (o["end"] is None or o["end"] > r["start"])]
            H.check(not busy, "a request parked across the reload to concurrency 1 reached"
                    " the origin %.2fs after the reload while %d other(s) were in flight"
                    % (r["start"] - t_reload, len(busy)))

    peak = batch(proxy, origin, "/after-reload", 0.3)
    H.log("new requests after the reload: origin peak %d" % peak)
    H.check(peak == 1, "after SIGHUP lowered concurrency from 2 to 1, new requests reached"
            " an origin peak of %d, expected exactly 1" % peak)
    H.check(proxy.alive(), "the proxy is gone:\n%s" % proxy.tail())

    # C. A slow file system: the new file is a FIFO that nobody writes for a while.
    text = H.dump_config(H.base_config(concurrency=2, rate=100, burst=100))
    os.unlink(proxy.config_path)
    os.mkfifo(proxy.config_path)
    os.kill(proxy.pid, signal.SIGHUP)
    time.sleep(0.2)
    started = time.monotonic()
    r = H.request(proxy, "http://%s:%d/while-reading" % (HOST, origin.port), timeout=5)
    took = time.monotonic() - started
    H.log("C. a reload waiting for its file: a new request answered %s in %.2f s" % (r.status, took))
    H.check(r.status == 200 and took < 2, "while a reload waited for its file, a new request got %s after %.2f s"
            % (r.status if not r.error else r.error, took))
    ok_before = reloads(proxy)[0]
    with open(proxy.config_path, "w") as f:  # opens once the proxy's reader is there
        f.write(text)
    H.check(H.wait_until(lambda: reloads(proxy)[0] == ok_before + 1, timeout=5),
            "the reload did not apply once its file came: reloads (success, failure) %s\n%s" % (reloads(proxy), proxy.tail()))


if __name__ == "__main__":
    H.main(test, timeout=45)
