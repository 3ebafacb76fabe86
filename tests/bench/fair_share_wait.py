#!/usr/bin/python3
"""A small crawler's wait behind a big one, with clients.share: fifo and fair (issue 28).

The scenario of tests/integration/test_fair_share.py part A, once per sharing mode in
the same run: one host at concurrency 2 and 200 ms per response (rate out of the way,
adaptive off), crawler A parks N requests (one connection each), then crawler B sends
20 requests at 1 s ticks (clients.identify_by: header:X-Crawler). Printed per mode: B's
queue wait (the proxy's Proxy-Status queue-wait=) p50, p95 and max, and the host's
throughput over B's 20 s against the ideal 2 / 0.2 s.

    /usr/bin/python3 tests/bench/fair_share_wait.py [--proxy build/politeproxy] [--parked 2000]
        [--requests 20] [--modes fifo,fair]

With share: fifo, B's requests wait behind all of A's: about N x 0.2 s / 2 (200 s at
the default 2000), so the run takes that long (queue.max_wait is 10m; --parked 500
makes it a minute). Not part of ctest; exit status 0 when every mode ran."""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness as H  # noqa: E402
from test_fair_share import SERVICE, describe, two_crawlers  # noqa: E402


def table(rows):
    def f(x):
        return "-" if x is None else "%.3f" % x
    lines = ["| share | A parked | B answered | B queue wait p50 (s) | p95 (s) | max (s) | host throughput (/s) | ideal (/s) | origin peak |",
             "|---|---|---|---|---|---|---|---|---|"]
    for res in rows:
        b = res.get("b") or []
        lines.append("| %s | %d | %d of %d | %s | %s | %s | %.2f | %.2f | %d |" % (
            res["share"], res["parked"], sum(1 for r in b if r.status == 200), len(b), f(res.get("b_p50")),
            f(res.get("b_p95")), f(res.get("b_max")), res.get("throughput", 0.0), res.get("ideal_throughput", 0.0),
            res.get("peak", -1)))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--proxy", default=os.path.join(ROOT, "build", "politeproxy"))
    ap.add_argument("--parked", type=int, default=2000, help="crawler A's parked requests (default 2000)")
    ap.add_argument("--requests", type=int, default=20, help="crawler B's requests, 1 s apart (default 20)")
    ap.add_argument("--modes", default="fifo,fair", help="clients.share values, in order (default fifo,fair)")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    rows = []

    def run(t):
        for mode in modes:
            res = two_crawlers(t, mode, parked=a.parked, b_requests=a.requests, b_interval=1.0, service=SERVICE,
                               concurrency=2)
            H.log(describe(res))
            rows.append(res)
        print("\nfair_share_wait: crawler A parks %d, crawler B sends %d at 1 s ticks; concurrency 2, %.0f ms per"
              " response\n" % (a.parked, a.requests, SERVICE * 1000))
        print(table(rows), flush=True)
        print(flush=True)

    # fifo: B's last answer comes after all of A's parked requests
    budget = sum(a.parked * SERVICE / 2 + 90 if m == "fifo" else 90 for m in modes) + 60
    H.main(run, timeout=budget, argv=["--proxy", a.proxy])


if __name__ == "__main__":
    main()
