#!/usr/bin/python3
"""What sharing a host's slots among clients costs per parked request, beside the single
FIFO queue of an earlier commit (BASE, default 0132665: the last commit before clients:),
in one run, at two layers:

  gate        the sans-io policy/gate alone (tests/bench/fair_gate_bench.cpp): a request
              finishes, the gate advances, a new one parks; 2000 parked, limit 2
  admission   parked requests through host_gates, the registry every request goes
              through (tests/bench/fair_admission_bench.cpp): coroutines parked on their
              timers, the shard lock, permits; 2000 parked, limit 2

each with the parked requests spread over 1, 10 and 1000 clients (clients.share: fair).
The gate is built from sources with g++ -O2 (BASE's taken with `git show`); the
admission bench is linked against a build tree's libraries: --build (default build/)
and --base-build (a build tree of BASE; default: made with `git worktree add` in
/tmp/politeproxy-ab-BASE and `cmake --build --target gate_bench`, once: slow the first
time). Cases run interleaved, --repeat times, pinned to core 1; medians are reported.
Issue 28 bounds a parked request's cost with 1 client at 1.2x the single queue's.

Usage: /usr/bin/python3 tests/bench/fair_gate_ab.py [--base REV] [--base-build DIR] [--repeat K]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_DIR = os.path.join(REPO, "tests", "bench")
GATE_FLAGS = ["g++", "-std=c++23", "-O2", "-DNDEBUG"]
CLIENTS = (1, 10, 1000)


def git_show(rev, path):
    return subprocess.run(["git", "-C", REPO, "show", "%s:%s" % (rev, path)], check=True,
                          stdout=subprocess.PIPE, text=True).stdout


def build_gate_baseline(rev, tmp):
    inc = os.path.join(tmp, "include", "politeproxy")
    for sub in ("policy", "base"):
        os.makedirs(os.path.join(inc, sub), exist_ok=True)
    for header in ("policy/gate.hpp", "policy/token_bucket.hpp", "base/clock.hpp"):
        with open(os.path.join(inc, header), "w") as f:
            f.write(git_show(rev, "include/politeproxy/" + header))
    srcs = []
    for src in ("proxy/policy/gate.cpp", "proxy/policy/token_bucket.cpp"):
        out = os.path.join(tmp, "base_" + os.path.basename(src))
        with open(out, "w") as f:
            f.write(git_show(rev, src))
        srcs.append(out)
    exe = os.path.join(tmp, "gate_base")
    subprocess.run(GATE_FLAGS + ["-DPOLITEPROXY_BASELINE_GATE", "-I", os.path.join(tmp, "include"),
                                 os.path.join(BENCH_DIR, "fair_gate_bench.cpp")] + srcs + ["-o", exe], check=True)
    return exe


def build_gate_current(tmp):
    exe = os.path.join(tmp, "gate_current")
    srcs = [os.path.join(REPO, "proxy", "policy", s) for s in
            ("gate.cpp", "token_bucket.cpp", "fair_queue.cpp", "client_account.cpp")]
    subprocess.run(GATE_FLAGS + ["-I", os.path.join(REPO, "include"), os.path.join(BENCH_DIR, "fair_gate_bench.cpp")] +
                   srcs + ["-o", exe], check=True)
    return exe


def ninja_vars(build, block_start):
    """DEFINES, FLAGS, INCLUDES or LINK_LIBRARIES of a build.ninja block."""
    text = open(os.path.join(build, "build.ninja")).read()
    i = text.index(block_start)
    block = text[i:text.index("\n\n", i)]
    return {m.group(1): m.group(2) for m in re.finditer(r"^  (\w+) = (.*)$", block, re.M)}


def build_admission(build, source_include, exe, baseline):
    """fair_admission_bench against `build`'s libraries (flags and link line of its gate_bench)."""
    compile_vars = ninja_vars(build, "build CMakeFiles/gate_bench.dir/tests/bench/gate_bench.cpp.o")
    link_vars = ninja_vars(build, "build gate_bench:")
    libs = [a if not re.match(r"libpoliteproxy_\w+\.a$", a) else os.path.join(build, a)
            for a in link_vars["LINK_LIBRARIES"].split()]
    cmd = ["g++"] + compile_vars["FLAGS"].split() + compile_vars["DEFINES"].split() + \
          ["-I", source_include, "-isystem", "/usr/include/hiredis"] + \
          (["-DPOLITEPROXY_BASELINE_GATE"] if baseline else []) + \
          [os.path.join(BENCH_DIR, "fair_admission_bench.cpp"), "-o", exe] + libs
    subprocess.run(cmd, check=True)
    return exe


def ensure_base_build(rev, given):
    if given:
        return given
    tree = "/tmp/politeproxy-ab-%s" % rev
    if not os.path.isdir(tree):
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", tree, rev], check=True)
    build = os.path.join(tree, "build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        subprocess.run(["cmake", "-S", tree, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], check=True)
    subprocess.run(["cmake", "--build", build, "-j2", "--target", "gate_bench"], check=True)
    return build


def run(exe, clients, requests):
    out = subprocess.run(["taskset", "-c", "1", exe, str(clients), str(requests)], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return float(out.strip())


def table(title, cases, times, repeat):
    base = statistics.median(times[cases[0][0]])
    print("| %s | ns per request (median of %d) | vs single queue |" % (title, repeat))
    print("|---|---|---|")
    ratios = {}
    for name, _, clients in cases:
        med = statistics.median(times[name])
        ratios[clients] = med / base
        print("| %s | %.1f | %.2fx |" % (name, med, med / base))
    print()
    return ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="0132665")
    ap.add_argument("--base-build", help="a build tree of BASE (with its libpoliteproxy_*.a)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    base_build = ensure_base_build(a.base, a.base_build)
    base_include = os.path.join(os.path.dirname(os.path.abspath(base_build)), "include")
    with tempfile.TemporaryDirectory() as tmp:
        gate_current = build_gate_current(tmp)
        admission_current = build_admission(a.build, os.path.join(REPO, "include"), os.path.join(tmp, "adm_current"), False)
        name = lambda n: "fair, %d client%s" % (n, "" if n == 1 else "s")
        layers = [
            ("gate (sans-io)", 2000000,
             [("single FIFO queue (%s)" % a.base, build_gate_baseline(a.base, tmp), 0)] +
             [(name(n), gate_current, n) for n in CLIENTS]),
            ("admission through host_gates", 300000,
             [("single FIFO queue (%s)" % a.base,
               build_admission(base_build, base_include, os.path.join(tmp, "adm_base"), True), 0)] +
             [(name(n), admission_current, n) for n in CLIENTS]),
        ]
        results = []
        for title, requests, cases in layers:
            times = {name: [] for name, _, _ in cases}
            for _ in range(a.repeat):
                for name, exe, clients in cases:
                    times[name].append(run(exe, clients, requests))
            results.append((title, table(title, cases, times, a.repeat)))
    for title, ratios in results:
        print("%s, 1 client: %.2fx the single queue" % (title, ratios[1]))
    admission_one = results[1][1][1]
    print("a parked request's admission with 1 client: %.2fx (bound 1.2x): %s"
          % (admission_one, "ok" if admission_one <= 1.2 else "OVER"))
    return 0 if admission_one <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
