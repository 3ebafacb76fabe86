#!/usr/bin/python3
"""A 429 with `Retry-After: 2` on a host with concurrency 4 collapses the host: the
origin sees nothing from it for ~2 s (backoff.initial 1s is shorter, so Retry-After
wins), then at most 1 request in flight; during the pause /metrics shows
host_concurrency_limit 1, host_paused_seconds > 0, the rate halved and
limit_changes_total{direction="collapse"} >= 1."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "retry.test"
N = 6
DELAY = 0.3
RETRY_AFTER = 2.0


def peak_since(records, t0):
    """Most requests the origin had in flight at once among those that arrived >= t0."""
    events = []
    for r in records:
        if r["start"] >= t0:
            events.append((r["start"], 1))
            events.append((r["end"] if r["end"] is not None else float("inf"), -1))
    peak = cur = 0
    for _, d in sorted(events):  # an end (-1) sorts before a start at the same instant
        cur += d
        peak = max(peak, cur)
    return peak


def host_series(m):
    return "\n".join("%s%s %s" % (n, dict(ls), v) for (n, ls), v in sorted(m.items())
                     if dict(ls).get("host") == HOST)


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=4, rate=100, burst=100,
                                  backoff={"initial": "1s", "max": "10s", "jitter": 0}))
    base = "http://%s:%d" % (HOST, origin.port)

    r = H.request(proxy, base + "/limited?status=429&retry_after=%d" % RETRY_AFTER)
    H.check(r.error is None and r.status == 429,
            "the origin's 429 should pass through to the client, got %r" % r)
    H.check(r.header("Retry-After") == "%d" % RETRY_AFTER,
            "the 429 lost its Retry-After on the way: %r" % r.headers)
    def limited():
        return [x for x in origin.host(HOST)["requests"] if x["target"].startswith("/limited")]
    # the origin notes the end of a request after its last write: the client may be first
    H.wait_until(lambda: all(x["end"] is not None for x in limited()), 2.0)
    rec = limited()
    H.check(len(rec) == 1 and rec[0]["end"] is not None, "origin records: %r" % rec)
    t429 = rec[0]["end"]  # the origin sent the 429 here; the proxy saw it just after
    H.log("429 answered; starting %d requests" % N)

    bg = H.Background(proxy, [base + "/after?delay=%s&i=%d" % (DELAY, i) for i in range(N)],
                      timeout=30)

    # during the pause: every request parked, limit 1, paused_seconds > 0
    def parked():
        m = proxy.metrics()
        return H.mget(m, "politeproxy_host_waiting", host=HOST) == N and m
    m = H.wait_until(parked, 1.0, interval=0.02) or proxy.metrics()
    now = time.monotonic()
    limit = H.mget(m, "politeproxy_host_concurrency_limit", host=HOST)
    paused = H.mget(m, "politeproxy_host_paused_seconds", host=HOST)
    rate = H.mget(m, "politeproxy_host_rate_limit", host=HOST)
    collapses = H.mget(m, "politeproxy_limit_changes_total", host=HOST, direction="collapse")
    H.log("during the pause (%.2fs after the 429): limit=%s paused_seconds=%s rate=%s "
          "collapse=%s waiting=%s origin count=%d"
          % (now - t429, limit, paused, rate, collapses,
             H.mget(m, "politeproxy_host_waiting", host=HOST), origin.host(HOST)["count"]))
    H.check(now - t429 < 1.5, "test too slow: metrics read %.2fs after the 429" % (now - t429))
    H.check(limit == 1, "after a 429 host_concurrency_limit{host=%s} should be 1, saw %s;\n%s"
            % (HOST, limit, host_series(m)))
    H.check(paused is not None and 0 < paused <= RETRY_AFTER + 0.1,
            "%.2fs after a 429 with Retry-After: %d host_paused_seconds{host=%s} should be"
            " in (0, %d], saw %s;\n%s" % (now - t429, RETRY_AFTER, HOST, RETRY_AFTER, paused,
                                         host_series(m)))
    H.check(paused >= RETRY_AFTER - (now - t429) - 0.3,
            "host_paused_seconds %.2f %.2fs after the 429: the pause is shorter than the"
            " Retry-After of %ds (backoff.initial is only 1s)" % (paused, now - t429,
                                                                  RETRY_AFTER))
    H.check(rate is not None and abs(rate - 50) < 1e-6,
            "after a 429 the rate should halve from 100 to 50, host_rate_limit is %s" % rate)
    H.check(collapses is not None and collapses >= 1,
            "limit_changes_total{host=%s,direction=\"collapse\"} is %s after a 429;\n%s"
            % (HOST, collapses, host_series(m)))
    H.check(origin.host(HOST)["count"] == 1,
            "the origin already saw %d requests from the paused host"
            % (origin.host(HOST)["count"] - 1))

    results = bg.wait(40)
    bad = [x for x in results if x.error or x.status != 200]
    H.check(not bad, "%d requests after the pause did not get 200: %s" % (len(bad), bad[:5]))

    recs = [x for x in origin.host(HOST)["requests"] if x["target"].startswith("/after")]
    H.check(len(recs) == N, "origin saw %d of the %d requests" % (len(recs), N))
    starts = sorted(x["start"] - t429 for x in recs)
    peak = peak_since(recs, t429)
    H.log("arrivals after the 429 (s): %s; origin peak %d"
          % (", ".join("%.2f" % s for s in starts), peak))
    H.check(starts[0] >= RETRY_AFTER - 0.2,
            "the first request after the 429 reached the origin %.2fs after it; Retry-After"
            " was %ds" % (starts[0], RETRY_AFTER))
    H.check(starts[0] <= RETRY_AFTER + 1.0,
            "the parked requests left %.2fs after the 429: the pause lasted well beyond"
            " Retry-After %ds" % (starts[0], RETRY_AFTER))
    H.check(peak == 1, "after the pause the origin had %d requests in flight from %s; the"
            " collapsed limit is 1" % (peak, HOST))

    m = proxy.metrics()
    paused = H.mget(m, "politeproxy_host_paused_seconds", host=HOST)
    H.check(paused in (None, 0), "host_paused_seconds is %s after the pause ended" % paused)


if __name__ == "__main__":
    H.main(test, timeout=40)
