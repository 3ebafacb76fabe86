#!/usr/bin/python3
"""metrics.max_host_series at 10x: a cap of 50 and 510 hosts with state.
  - /metrics passes `promtool check metrics`, names exactly 50 hosts plus host="_other",
    and loses no request: requests_total summed over every series is 560;
  - the busiest hosts keep theirs: 10 hosts sent 6 requests each before the first scrape
    all have series of their own;
  - names do not flap: after a quiet host becomes the busiest, the next scrape names the
    same 50 hosts, and _other's requests_total has not gone back (a counter);
  - the scrape stays small and fast: under 256 KiB, median answer under 0.5 s (of 5).
Uncapped, the same scrape would carry ten times the per-host series."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

CAP = 50
QUIET = 500
BUSY = 10
MAX_BYTES = 256 * 1024
MAX_SECONDS = 0.5


def send(proxy, urls):
    for i in range(0, len(urls), 50):
        results = H.concurrent(proxy, urls[i:i + 50], timeout=20)
        bad = [r for r in results if r.error or r.status != 200]
        H.check(not bad, "%d requests failed: %s" % (len(bad), bad[:3]))


def host_labels(m):
    return {dict(ls)["host"] for (n, ls) in m if n == "politeproxy_requests_total"}


def requests_of(m, host):
    return sum(v for (n, ls), v in m.items() if n == "politeproxy_requests_total" and dict(ls)["host"] == host)


def scrape(proxy):
    t0 = time.monotonic()
    text = proxy.metrics_text()
    return text, time.monotonic() - t0


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=4, rate=1000, burst=1000)
    cfg["metrics"] = {"max_host_series": CAP}
    proxy = t.proxy(cfg)
    send(proxy, ["http://busy%d.test:%d/b?i=%d" % (b, origin.port, i) for b in range(BUSY) for i in range(6)])
    send(proxy, ["http://q%d.test:%d/q" % (q, origin.port) for q in range(QUIET)])

    H.metrics_when(proxy, "politeproxy_requests_total", QUIET + 6 * BUSY)
    text, _ = scrape(proxy)
    H.promtool_check(text)
    m = H.parse_metrics(text)
    H.check(H.mget(m, "politeproxy_hosts_tracked") == QUIET + BUSY,
            "hosts_tracked %s, expected %d" % (H.mget(m, "politeproxy_hosts_tracked"), QUIET + BUSY))
    names = host_labels(m)
    H.check("_other" in names and len(names) == CAP + 1,
            "%d host labels (expected %d named + _other): %s" % (len(names), CAP, sorted(names)[:8]))
    for b in range(BUSY):
        H.check("busy%d.test" % b in names, "busy%d.test (6 requests) has no series of its own" % b)
    total = sum(v for (n, _), v in m.items() if n == "politeproxy_requests_total")
    H.check(total == QUIET + 6 * BUSY, "requests_total over every series is %s, expected %d" % (total, QUIET + 6 * BUSY))
    other_before = requests_of(m, "_other")
    H.check(other_before == QUIET - (CAP - BUSY), "_other counts %s requests, expected %d"
            % (other_before, QUIET - (CAP - BUSY)))
    for n in ("politeproxy_host_in_flight", "politeproxy_host_concurrency_limit"):
        series = [ls for (name, ls) in m if name == n]
        H.check(len(series) <= CAP + 1, "%s has %d series, more than the cap" % (n, len(series)))

    # A quiet host without a series becomes the busiest: names stay, _other grows.
    unnamed = sorted("q%d.test" % q for q in range(QUIET) if "q%d.test" % q not in names)[0]
    send(proxy, ["http://%s:%d/again?i=%d" % (unnamed, origin.port, i) for i in range(20)])
    H.metrics_when(proxy, "politeproxy_requests_total", QUIET + 6 * BUSY + 20)
    text, _ = scrape(proxy)
    m = H.parse_metrics(text)
    H.check(host_labels(m) == names, "the named hosts changed between scrapes: %s"
            % sorted(host_labels(m) ^ names))
    H.check(requests_of(m, "_other") == other_before + 20,
            "_other's requests_total went from %s to %s, expected +20" % (other_before, requests_of(m, "_other")))

    times = []
    for _ in range(5):
        text, seconds = scrape(proxy)
        times.append(seconds)
    size = len(text.encode())
    H.log("scrape at %dx the cap: %d bytes, median %.1f ms" % ((QUIET + BUSY) // CAP, size, statistics.median(times) * 1000))
    H.check(size < MAX_BYTES, "the scrape is %d bytes, over %d" % (size, MAX_BYTES))
    H.check(statistics.median(times) < MAX_SECONDS, "the scrape took %.3f s (median), over %.1f s"
            % (statistics.median(times), MAX_SECONDS))


if __name__ == "__main__":
    H.main(test, timeout=90)
