#!/usr/bin/python3
"""End to end: the adaptive limit follows the host's latency.

concurrency 2, adaptive {grow_interval: 1s, hard_max: 3}:
  1. 70 fast responses (delay 0.05) fill the host's p95 window (64);
  2. a run of responses 10x slower (delay 0.5) lowers host_concurrency_limit below 2
     (the median of the last five beyond 1.5x p95: a jump);
  3. faster than before (delay 0.01): the limit climbs back, one step per grow_interval,
     past the configured 2 (the host became faster than its baseline) up to hard_max 3
     and never above it.
A sampler reads /metrics every 50 ms throughout; the origin's peak never exceeds 3."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "adapt.test"
FAST = 0.05
SLOW = 0.5
FASTER = 0.01
WARM = 70
HARD_MAX = 3
GROW_INTERVAL = 1.0


class Sampler:
    """host_concurrency_limit every `interval` seconds, in a background thread."""

    def __init__(self, proxy, interval=0.05):
        self.proxy = proxy
        self.interval = interval
        self.samples = []  # (monotonic, limit or None)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                m = self.proxy.metrics()
                v = H.mget(m, "politeproxy_host_concurrency_limit", host=HOST)
                self.samples.append((time.monotonic(), v))
            except Exception as e:  # noqa: BLE001 - recorded, the test decides
                self.samples.append((time.monotonic(), "error: %s" % e))
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._t.join(5)

    def latest(self):
        return self.samples[-1][1] if self.samples else None

    def since(self, t0):
        return [(t, v) for t, v in self.samples if t >= t0]


def loop(proxy, url, count=None, until=None, threads=1):
    """`threads` clients, each sending requests one after another: `count` in all, or
    until the predicate `until()` is true. Returns the results."""
    results = []
    lock = threading.Lock()
    sent = [0]

    def run(k):
        while True:
            with lock:
                if count is not None and sent[0] >= count:
                    return
                sent[0] += 1
                i = sent[0]
            if until is not None and until():
                return
            r = H.request(proxy, url + "&i=%d" % i, timeout=20)
            with lock:
                results.append(r)

    th = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(threads)]
    for x in th:
        x.start()
    for x in th:
        x.join(30)
    return results


def steps(samples):
    """[(time, old, new)] for every change of the sampled limit."""
    out = []
    prev = None
    for t, v in samples:
        if isinstance(v, float) and prev is not None and v != prev:
            out.append((t, prev, v))
        if isinstance(v, float):
            prev = v
    return out


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(
        concurrency=2, rate=100, burst=100,
        adaptive={"enabled": True, "hard_max": HARD_MAX,
                  "grow_interval": "%gs" % GROW_INTERVAL},
        backoff={"initial": "1s", "max": "10s", "jitter": 0}))
    base = "http://%s:%d" % (HOST, origin.port)
    sampler = Sampler(proxy)
    try:
        # ---- 1: fast -------------------------------------------------------------------
        t1 = time.monotonic()
        res = loop(proxy, base + "/fast?delay=%s" % FAST, count=WARM, threads=2)
        bad = [r for r in res if r.error or r.status != 200]
        H.check(not bad, "fast phase: %d requests failed: %s" % (len(bad), bad[:5]))
        limit1 = sampler.latest()
        H.log("fast phase: %d responses in %.2fs; limit now %s" % (WARM,
              time.monotonic() - t1, limit1))

        # ---- 2: 10x slower -------------------------------------------------------------
        t2 = time.monotonic()
        res = loop(proxy, base + "/slow?delay=%s" % SLOW, count=6, threads=2)
        bad = [r for r in res if r.error or r.status != 200]
        H.check(not bad, "slow phase: %d requests failed: %s" % (len(bad), bad[:5]))
        slow_samples = sampler.since(t2)
        low = min((v for _, v in slow_samples if isinstance(v, float)), default=None)
        H.log("slow phase: 6 responses in %.2fs; lowest limit seen %s, limit now %s"
              % (time.monotonic() - t2, low, sampler.latest()))
        H.check(low is not None and low < 2,
                "after %d fast (%.2fs) responses, a run of %.1fs responses should lower"
                " host_concurrency_limit below 2; sampled: %s"
                % (WARM, FAST, SLOW, sorted(set(v for _, v in slow_samples))))

        # ---- 3: fast again -------------------------------------------------------------
        t3 = time.monotonic()
        reached = {}

        def at_max_for_a_while():  # 0.6 s on end: a step back down starts the wait again
            v = sampler.latest()
            if v != HARD_MAX:
                reached.clear()
            elif "t" not in reached:
                reached["t"] = time.monotonic()
            return "t" in reached and time.monotonic() - reached["t"] >= 0.6 or \
                time.monotonic() - t3 > 4.5
        res = loop(proxy, base + "/fast2?delay=%s" % FASTER, until=at_max_for_a_while,
                   threads=HARD_MAX)
        bad = [r for r in res if r.error or r.status != 200]
        H.check(not bad, "recovery phase: %d requests failed: %s" % (len(bad), bad[:5]))
        time.sleep(0.1)
    finally:
        sampler.stop()

    all_steps = steps(sampler.samples)
    H.log("limit steps (s since start of phase 1, old -> new): %s"
          % ", ".join("%.2f: %g->%g" % (t - t1, a, b) for t, a, b in all_steps))
    H.log("recovery phase: %d responses in %.2fs" % (len(res), time.monotonic() - t3))
    values = [v for _, v in sampler.samples if isinstance(v, float)]
    H.check(values, "no host_concurrency_limit samples for %s: %s"
            % (HOST, sampler.samples[-5:]))
    H.check(max(values) <= HARD_MAX,
            "host_concurrency_limit reached %g, above adaptive.hard_max %d"
            % (max(values), HARD_MAX))
    H.check(min(values) >= 1, "host_concurrency_limit fell to %g" % min(values))

    rec = sampler.since(t3)
    final = sampler.latest()
    H.check(final == HARD_MAX,
            "with the host fast again for %.1fs the limit should climb back to hard_max %d"
            " (one step per %gs grow_interval); sampled during recovery: %s"
            % (time.monotonic() - t3, HARD_MAX, GROW_INTERVAL,
               sorted(set(v for _, v in rec if isinstance(v, float)))))

    # one step per grow_interval: consecutive increases are >= grow_interval apart
    ups = [(t, a, b) for t, a, b in all_steps if b > a]
    for (ta, a0, a1), (tb, b0, b1) in zip(ups, ups[1:]):
        H.check(b1 - b0 == 1 and a1 - a0 == 1, "the limit grew by more than 1 at once: %s"
                % ups)
        H.check(tb - ta >= GROW_INTERVAL - 0.15,
                "the limit grew twice within %.2fs (%g->%g, then %g->%g); grow_interval is"
                " %gs" % (tb - ta, a0, a1, b0, b1, GROW_INTERVAL))
    H.check(ups, "the sampled limit never increased")

    m = proxy.metrics()
    up = H.mget(m, "politeproxy_limit_changes_total", host=HOST, direction="up")
    down = H.mget(m, "politeproxy_limit_changes_total", host=HOST, direction="down")
    collapse = H.mget(m, "politeproxy_limit_changes_total", host=HOST, direction="collapse")
    H.log("limit_changes_total: up=%s down=%s collapse=%s" % (up, down, collapse))
    H.check(down is not None and down >= 1,
            "limit_changes_total{direction=\"down\"} is %s after the limit fell" % down)
    H.check(up is not None and up >= 1,
            "limit_changes_total{direction=\"up\"} is %s after the limit rose" % up)
    H.check(collapse in (None, 0),
            "limit_changes_total{direction=\"collapse\"} is %s: nothing answered 429/503"
            % collapse)
    peak = origin.host(HOST)["peak"]
    H.check(peak <= HARD_MAX, "origin peak %d for %s, above hard_max %d"
            % (peak, HOST, HARD_MAX))


if __name__ == "__main__":
    H.main(test, timeout=40)
