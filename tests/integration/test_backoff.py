#!/usr/bin/python3
"""A 503 without Retry-After pauses the host for backoff.initial (1s, jitter 0); a second
consecutive 503, sent after the first pause ended, doubles the pause (~2s).

Measured twice: host_paused_seconds read right after each 503, and the time from each
503 leaving the origin to the arrival of the next request, sent at once.

Then, on another host with concurrency 4: four requests in flight together all answered
503 are one incident (one collapse, a pause of backoff.initial, not doubled 3 times)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "backoff.test"
BURST = "burst.test"
INITIAL = 1.0


def incident(proxy, origin, base, n):
    """One 503 without Retry-After, then one ordinary request at once. Returns
    (host_paused_seconds right after the 503, seconds from the 503 leaving the origin
    to the next request's arrival)."""
    r = H.request(proxy, base + "/fail%d?status=503" % n)
    H.check(r.error is None and r.status == 503,
            "503 #%d: the origin's 503 should pass through, got %r" % (n, r))
    H.check(r.header("Retry-After") is None,
            "503 #%d came with a Retry-After (%r): the origin sent none"
            % (n, r.header("Retry-After")))
    m = proxy.metrics()
    t_read = time.monotonic()
    paused = H.mget(m, "politeproxy_host_paused_seconds", host=HOST)
    nxt = H.request(proxy, base + "/next%d" % n, timeout=20)
    H.check(nxt.error is None and nxt.status == 200,
            "the request after 503 #%d did not get 200: %r" % (n, nxt))
    reqs = origin.host(HOST)["requests"]
    fail = [x for x in reqs if x["target"].startswith("/fail%d" % n)]
    after = [x for x in reqs if x["target"].startswith("/next%d" % n)]
    H.check(len(fail) == 1 and len(after) == 1, "origin records: %r" % reqs)
    gap = after[0]["start"] - fail[0]["end"]
    H.log("503 #%d: host_paused_seconds %s (read %.3fs after the 503), next request"
          " reached the origin %.2fs after the 503"
          % (n, paused, t_read - fail[0]["end"], gap))
    H.check(paused is not None and paused > 0,
            "right after 503 #%d host_paused_seconds{host=%s} is %s, expected > 0"
            % (n, HOST, paused))
    return paused, gap, t_read - fail[0]["end"]


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(
        concurrency=2, rate=100, burst=100,
        hosts={BURST: {"concurrency": 4, "reason": "integration test: 4 at once"}},
        backoff={"initial": "%gs" % INITIAL, "max": "10s", "forgive_after": "30m",
                 "jitter": 0}))
    base = "http://%s:%d" % (HOST, origin.port)

    p1, gap1, lag1 = incident(proxy, origin, base, 1)
    H.check(INITIAL - lag1 - 0.3 <= p1 <= INITIAL + 0.05,
            "after the first 503 host_paused_seconds should be ~%.0fs (backoff.initial,"
            " jitter 0), saw %.3f" % (INITIAL, p1))
    H.check(INITIAL - 0.15 <= gap1 <= INITIAL + 0.7,
            "after the first 503 the next request reached the origin %.2fs later;"
            " expected ~%.0fs (backoff.initial)" % (gap1, INITIAL))

    # the first pause is over (the next request went through): a second 503 now is the
    # second consecutive incident
    p2, gap2, lag2 = incident(proxy, origin, base, 2)
    H.check(2 * INITIAL - lag2 - 0.3 <= p2 <= 2 * INITIAL + 0.05,
            "after the second consecutive 503 host_paused_seconds should be ~%.0fs"
            " (backoff doubled), saw %.3f" % (2 * INITIAL, p2))
    H.check(2 * INITIAL - 0.15 <= gap2 <= 2 * INITIAL + 0.7,
            "after the second consecutive 503 the next request reached the origin %.2fs"
            " later; expected ~%.0fs (backoff.initial doubled)" % (gap2, 2 * INITIAL))
    H.check(1.6 <= gap2 / gap1 <= 2.5,
            "the second pause (%.2fs) is not about double the first (%.2fs)" % (gap2, gap1))

    m = proxy.metrics()
    collapses = H.mget(m, "politeproxy_limit_changes_total", host=HOST,
                       direction="collapse")
    H.check(collapses == 2, "limit_changes_total{host=%s,direction=\"collapse\"} is %s"
            " after two 503s, expected 2" % (HOST, collapses))
    H.check(origin.host(HOST)["peak"] == 1, "origin peak %d" % origin.host(HOST)["peak"])

    # ---- four 503s from requests in flight together: one incident ---------------------
    url = "http://%s:%d/many?status=503&delay=0.3" % (BURST, origin.port)
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(4)], timeout=20)
    H.check([r.status for r in results] == [503] * 4,
            "four concurrent requests answered 503 by the origin: %s" % results)
    st = origin.host(BURST)
    H.check(st["peak"] == 4, "the four requests were not in flight together (origin peak"
            " %d, concurrency 4)" % st["peak"])
    # (the origin records a request's end before its response goes out)
    t_last = max(r["end"] for r in st["requests"])
    m = proxy.metrics()
    lag = time.monotonic() - t_last
    paused = H.mget(m, "politeproxy_host_paused_seconds", host=BURST)
    collapses = H.mget(m, "politeproxy_limit_changes_total", host=BURST,
                       direction="collapse")
    nxt = H.request(proxy, "http://%s:%d/next" % (BURST, origin.port), timeout=20)
    H.check(nxt.error is None and nxt.status == 200, "request after the 503s: %r" % nxt)
    rec = [r for r in origin.host(BURST)["requests"] if r["target"] == "/next"]
    gap = rec[0]["start"] - t_last
    H.log("four in-flight 503s: collapse=%s paused_seconds=%s (%.3fs after the last),"
          " next request %.2fs after the last 503" % (collapses, paused, lag, gap))
    H.check(collapses == 1,
            "four 503s to requests that were in flight together should be one incident:"
            " limit_changes_total{host=%s,direction=\"collapse\"} is %s" % (BURST, collapses))
    H.check(paused is not None and paused <= INITIAL + 0.05,
            "after four 503s from one round of requests host_paused_seconds is %s; one"
            " incident pauses for backoff.initial %.0fs (consecutive doubling would give"
            " up to %.0fs)" % (paused, INITIAL, 8 * INITIAL))
    H.check(gap <= INITIAL + 0.7,
            "after four 503s from one round of requests the next request waited %.2fs;"
            " one incident pauses for ~%.0fs" % (gap, INITIAL))


if __name__ == "__main__":
    H.main(test, timeout=30)
