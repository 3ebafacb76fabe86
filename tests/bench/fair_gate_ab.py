#!/usr/bin/python3
"""The gate's cost per request with a host's waiting requests spread over 1, 10 and
1000 clients (clients.share: fair), beside the single FIFO queue of an earlier commit's
gate, in one run (issue 28: at most 1.2x at 1 client).

Builds tests/bench/fair_gate_bench.cpp twice with g++ -O2 (a few seconds): against this
tree's policy/gate, and against BASE's (default 0132665, the last commit before the fair
queue), whose gate sources `git show` writes into a temporary include tree. Each case
runs REPEAT times (interleaved), pinned to one core; the median is reported.

Usage: /usr/bin/python3 tests/bench/fair_gate_ab.py [--base REV] [--requests N] [--repeat K]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "tests", "bench", "fair_gate_bench.cpp")
FLAGS = ["g++", "-std=c++23", "-O2", "-DNDEBUG"]


def git_show(rev, path):
    return subprocess.run(["git", "-C", REPO, "show", "%s:%s" % (rev, path)], check=True,
                          stdout=subprocess.PIPE, text=True).stdout


def build_baseline(rev, tmp):
    inc = os.path.join(tmp, "include", "politeproxy")
    for sub in ("policy", "base"):
        os.makedirs(os.path.join(inc, sub), exist_ok=True)
    for header in ("policy/gate.hpp", "policy/token_bucket.hpp", "base/clock.hpp"):
        with open(os.path.join(inc, header), "w") as f:
            f.write(git_show(rev, "include/politeproxy/" + header))
    srcs = []
    for src in ("proxy/policy/gate.cpp", "proxy/policy/token_bucket.cpp"):
        out = os.path.join(tmp, os.path.basename(src))
        with open(out, "w") as f:
            f.write(git_show(rev, src))
        srcs.append(out)
    exe = os.path.join(tmp, "baseline")
    subprocess.run(FLAGS + ["-DPOLITEPROXY_BASELINE_GATE", "-I", os.path.join(tmp, "include"), BENCH] + srcs +
                   ["-o", exe], check=True)
    return exe


def build_current(tmp):
    exe = os.path.join(tmp, "current")
    srcs = [os.path.join(REPO, "proxy", "policy", s) for s in
            ("gate.cpp", "token_bucket.cpp", "fair_queue.cpp", "client_account.cpp")]
    subprocess.run(FLAGS + ["-I", os.path.join(REPO, "include"), BENCH] + srcs + ["-o", exe], check=True)
    return exe


def run(exe, clients, requests):
    out = subprocess.run(["taskset", "-c", "1", exe, str(clients), str(requests)], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return float(out.strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="0132665")
    ap.add_argument("--requests", type=int, default=2000000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        baseline = build_baseline(a.base, tmp)
        current = build_current(tmp)
        cases = [("single FIFO queue (%s)" % a.base, baseline, 0)] + \
                [("fair, %d client%s" % (n, "" if n == 1 else "s"), current, n) for n in (1, 10, 1000)]
        times = {name: [] for name, _, _ in cases}
        for _ in range(a.repeat):
            for name, exe, clients in cases:
                times[name].append(run(exe, clients, a.requests))
    base = statistics.median(times[cases[0][0]])
    print("| gate, 2000 parked, limit 2 | ns per request (median of %d) | vs single queue |" % a.repeat)
    print("|---|---|---|")
    worst_one = None
    for name, _, clients in cases:
        med = statistics.median(times[name])
        print("| %s | %.1f | %.2fx |" % (name, med, med / base))
        if clients == 1:
            worst_one = med / base
    print()
    ok = worst_one is not None and worst_one <= 1.2
    print("1 client: %.2fx the single queue (bound 1.2x): %s" % (worst_one, "ok" if ok else "OVER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
