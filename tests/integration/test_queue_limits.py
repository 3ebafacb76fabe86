#!/usr/bin/python3
"""Queue bounds answer 503 with Retry-After and Proxy-Status, and every request gets
exactly one response.

A: queue.max_waiting 2, concurrency 1, 6 concurrent slow requests: 1 in flight +
   2 waiting are served (200), the other 3 get 503 at once.
B: queue.max_wait 1s, concurrency 1: a request queued behind a 2.5 s one gets 503 with
   Retry-After after ~1 s."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "queue.test"


def check_503(resp, what):
    H.check(resp.header("Retry-After") is not None,
            "%s: 503 without Retry-After: %r" % (what, resp))
    ra = resp.header("Retry-After")
    H.check(ra.strip().isdigit() or "GMT" in ra,
            "%s: Retry-After %r is neither delta-seconds nor an HTTP date" % (what, ra))
    ps = resp.header("Proxy-Status") or ""
    H.check("politeproxy" in ps and "error=" in ps,
            "%s: 503 without 'Proxy-Status: politeproxy; error=...': %r" % (what, resp))


def exchange_all(proxy, origin, paths):
    """Send one raw request per path at once; collect every response per connection."""
    clients = []
    for p in paths:
        c = H.RawClient(proxy.port, timeout=5)
        clients.append((c, time.monotonic()))
    for (c, _), p in zip(clients, paths):
        c.send(H.raw_get(proxy.port, HOST, origin.port, p))
    out = [None] * len(paths)

    def read(i, c, t0):
        resps, leftover = c.read_all_responses(first_timeout=15, settle=0.5)
        out[i] = (resps, leftover, (c.first_response_at or time.monotonic()) - t0)
    th = [threading.Thread(target=read, args=(i, c, t0), daemon=True)
          for i, (c, t0) in enumerate(clients)]
    for x in th:
        x.start()
    for x in th:
        x.join(25)
    for c, _ in clients:
        c.close()
    return out


def final(resps):
    return [r for r in resps if r.status >= 200]


def test(t):
    origin = t.origin()

    # ---- A: max_waiting --------------------------------------------------------------
    proxy = t.proxy(H.base_config(concurrency=1, rate=100, burst=100,
                                  queue={"max_waiting": 2, "max_wait": "60s"}), "proxyA")
    out = exchange_all(proxy, origin, ["/a?delay=1&i=%d" % i for i in range(6)])
    statuses = []
    for i, o in enumerate(out):
        H.check(o is not None, "request %d: client still waiting for a response" % i)
        resps, leftover, took = o
        fin = final(resps)
        H.log("A request %d: %s after %.2fs" % (i, [r.status for r in resps], took))
        H.check(len(fin) == 1, "A request %d got %d final responses (expected exactly 1):"
                " %s, leftover %r" % (i, len(fin), resps, leftover[:200]))
        H.check(not leftover, "A request %d: unparsed bytes after the response: %r"
                % (i, leftover[:200]))
        statuses.append(fin[0].status)
        if fin[0].status == 503:
            check_503(fin[0], "A request %d" % i)
            H.check(took < 0.9, "A request %d: a queue-full 503 should be immediate, took"
                    " %.2fs" % (i, took))
    H.check(sorted(statuses) == [200] * 3 + [503] * 3,
            "max_waiting 2 + concurrency 1 with 6 requests: expected three 200 and three"
            " 503, got %s" % statuses)
    H.check(origin.host(HOST)["count"] == 3, "origin saw %d requests, expected 3"
            % origin.host(HOST)["count"])
    rej = H.msum(proxy.metrics(), "politeproxy_rejected_total")
    H.check(rej >= 3, "politeproxy_rejected_total sums to %s after 3 rejections" % rej)

    # ---- B: max_wait -----------------------------------------------------------------
    origin.reset()
    proxy = t.proxy(H.base_config(concurrency=1, rate=100, burst=100,
                                  queue={"max_waiting": 1000, "max_wait": "1s"}), "proxyB")
    holder = H.RawClient(proxy.port, timeout=5)
    t_hold = time.monotonic()
    holder.send(H.raw_get(proxy.port, HOST, origin.port, "/hold?delay=2.5"))
    H.check(H.wait_until(lambda: origin.host(HOST)["in_flight"] == 1, 2.0),
            "the first request never reached the origin")
    waiter = H.RawClient(proxy.port, timeout=5)
    t0 = time.monotonic()
    waiter.send(H.raw_get(proxy.port, HOST, origin.port, "/waiter"))
    resps, leftover = waiter.read_all_responses(first_timeout=6, settle=0.5)
    took = (waiter.first_response_at or time.monotonic()) - t0
    fin = final(resps)
    H.log("B queued request: %s after ~%.2fs" % ([r.status for r in resps], took))
    H.check(len(fin) == 1, "B queued request got %d final responses (expected 1): %s"
            % (len(fin), resps))
    H.check(fin[0].status == 503, "B queued request past max_wait 1s got %d, expected 503"
            % fin[0].status)
    check_503(fin[0], "B queued request")
    H.check(0.8 <= took <= 2.0, "B queued request answered after %.2fs, expected ~1 s"
            " (max_wait 1s)" % took)
    resps, leftover = holder.read_all_responses(first_timeout=6, settle=0.3)
    fin = final(resps)
    H.check(len(fin) == 1 and fin[0].status == 200,
            "B in-flight request: expected exactly one 200, got %s (after %.2fs)"
            % (resps, time.monotonic() - t_hold))
    H.check(not [r for r in origin.host(HOST)["requests"] if r["target"] == "/waiter"],
            "the request that got 503 still reached the origin")
    holder.close()
    waiter.close()


if __name__ == "__main__":
    H.main(test, timeout=45)
