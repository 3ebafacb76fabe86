#!/usr/bin/python3
"""Side-by-side benchmark of politeproxy against HAProxy, Squid and tinyproxy (issue 4).

    /usr/bin/python3 tests/bench/run_bench.py            # full run, about 15 minutes
    /usr/bin/python3 tests/bench/run_bench.py --quick    # smoke run, about 2 minutes

Everything runs on 127.0.0.1, on ports picked at run time, from temporary configs in a
temporary directory. Every process is started here, recorded by PID, and stopped by
that PID on exit (also on Ctrl-C, SIGTERM or an exception). The origin (nginx) and the
load generators share core 0; the proxy under test runs alone on core 1.

Scenarios (README.md in this directory explains each, and how to read the table):
  passthrough  one host, limits wide open; 1 KiB and 100 KiB; 1, 64, 256 connections;
               direct to nginx, HAProxy, Squid, tinyproxy, politeproxy, interleaved
  politeness   200 hosts x concurrency 2, origin delay 100 ms: achieved / 4000 req/s,
               and the origin's exact peak in flight per host
  memory       RSS per tracked host (100k hosts, then idle eviction) and per parked
               request (10k requests parked in 100 queues)
  gate         build/gate_bench: ns per acquire+release at 1, 1k, 100k, 1M hosts (and 1k used of 1M)

The summary (markdown) is printed at the end and written to /tmp/politeproxy-bench-*.md,
with the raw figures in a .json beside it. Exit status 0 when every run completed with
every response checked; 1 otherwise (the table says which run failed).
Standard library + python3-yaml only; run as root (it writes /proc/PID/clear_refs and
raises RLIMIT_NOFILE).
"""
# The code, one module per concept (this file is the command line, and re-exports the
# names other bench scripts use as run_bench.X):
#   bench_plan               paths, targets, scenarios, cells, cores, render()
#   bench_procs              processes by PID on their cores, /proc readings, log()
#   bench_http               ports, HTTP GETs, the listening line, /metrics
#   bench_runner             Bench: one run, its load generators and origins, the driver
#   bench_side_by_side       scenarios 1 and 1b (politeproxy against other proxies)
#   bench_politeproxy_alone  scenarios 2, 3 and 4 (politeness, memory, the gate)
#   bench_report             the machine, the markdown summary, the goals

import argparse
import datetime
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import bench_plan as plan
from bench_plan import (  # noqa: F401  (re-exported)
    BODIES, CONF, CONNS, HEADLINE, HERE, INTERCEPT_CELLS, INTERCEPT_PROXIES, LOAD_CPU, LUA,
    PASSTHROUGH_PROXIES, PROXIES, PROXY_CPU, REPO, RUNNABLE, SCENARIOS, TLS_ORIGIN_NAME,
    cost_config, intercept_cell, render)
from bench_procs import (  # noqa: F401  (re-exported)
    CLK_TCK, Interrupted, Proc, Procs, _T0, _child_setup, _libc, children_of, log,
    proc_cpu_seconds, proc_status_kb, reset_peak_rss, wait_log_line, wait_port, wrk_threads_done)
from bench_http import (  # noqa: F401  (re-exported)
    LABEL_RE, LISTEN_RE, METRIC_RE, _http, free_port, http_get, metric_sum, parse_metrics)
from bench_report import (  # noqa: F401  (re-exported)
    busy_processes, evaluate_goals, fmt, machine_info, median, medians, ratio, summarize)
from bench_runner import Bench


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 repeat x 3 s, 5 s politeness, 20k hosts, 2k parked requests")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of each pass-through cell (median)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per run of the 1 KiB c64 cell (the goals' cell)")
    ap.add_argument("--sweep-duration", type=int, default=3, help="seconds per run of the other pass-through cells")
    ap.add_argument("--proxies", default=",".join(PROXIES), help="comma list of %s" % ",".join(PROXIES))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma list of %s" % ",".join(SCENARIOS))
    ap.add_argument("--polite-duration", type=float, default=15.0, help="steady-state seconds measured")
    ap.add_argument("--polite-hosts", type=int, default=200)
    ap.add_argument("--polite-connections", type=int, default=1000)
    ap.add_argument("--polite-delay", type=float, default=0.1, help="origin delay, seconds")
    ap.add_argument("--polite-adaptive", action="store_true",
                    help="leave the adaptive limit on (hard_max 2) in the politeness scenario")
    ap.add_argument("--mem-hosts", type=int, default=100000)
    ap.add_argument("--parked", type=int, default=10000)
    ap.add_argument("--park-hosts", type=int, default=100)
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "politeproxy"))
    ap.add_argument("--baseline", default=None,
                    help="another politeproxy binary (the code before a change), run as 'baseline' in the"
                         " pass-through runs, interleaved with the others: an A/B in the same run")
    ap.add_argument("--gate-bench", default=os.path.join(REPO, "build", "gate_bench"))
    ap.add_argument("--intercept-rate", type=int, default=3000,
                    help="req/s of the intercept scenario's paced cells (every TLS target but mitmproxy sustains it)")
    ap.add_argument("--tls-load", default=os.path.join(REPO, "build", "tls_load"),
                    help="the intercept scenario's load generator (tests/bench/tls_load.cpp)")
    ap.add_argument("--out", default=None, help="report path (default /tmp/politeproxy-bench-DATE.md)")
    ap.add_argument("--no-install", action="store_true", help="skip scripts/install-deps.sh --bench")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (configs, logs)")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.duration, a.sweep_duration = 1, 3, 3
        a.polite_duration, a.mem_hosts, a.parked = 5.0, 20000, 2000
    a.proxies = [p.strip() for p in a.proxies.split(",") if p.strip()]
    a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    for p in a.proxies:
        if p not in PROXIES:
            ap.error("unknown proxy %r" % p)
    for s in a.scenarios:
        if s not in SCENARIOS:
            ap.error("unknown scenario %r" % s)
    if a.baseline:
        if not os.access(a.baseline, os.X_OK):
            ap.error("--baseline %s is not an executable" % a.baseline)
        a.proxies.append("baseline")
    if "politeproxy" not in a.proxies and "passthrough" in a.scenarios:
        log("note: without politeproxy the ratios are empty")

    if os.geteuid() != 0:
        log("warning: not root; /proc/PID/clear_refs and other users' processes may be out of reach")
    if not a.no_install:
        subprocess.run([os.path.join(REPO, "scripts", "install-deps.sh"), "--bench"], check=True)
    for tool in ("wrk", "nginx", "haproxy", "squid", "tinyproxy") + (("mitmdump",) if "mitmproxy" in a.proxies else ()):
        if not shutil.which(tool):
            sys.exit("%s not found: run scripts/install-deps.sh --bench" % tool)
    if "intercept" in a.scenarios and not os.access(a.tls_load, os.X_OK):
        sys.exit("%s not found: build the project first (cmake --build build)" % a.tls_load)
    if not os.access(a.binary, os.X_OK):
        sys.exit("%s not found: build politeproxy first (scripts/build.sh or cmake --build build)" % a.binary)

    global LOAD_CPU, PROXY_CPU
    if (os.cpu_count() or 1) < 2:
        LOAD_CPU = PROXY_CPU = plan.LOAD_CPU = plan.PROXY_CPU = 0
        log("warning: one core only: load and proxy share it")
    os.sched_setaffinity(0, {LOAD_CPU})  # the orchestrator stays off the proxy's core
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < a.parked + 2000:  # the proxy and park_load each hold one descriptor per parked request
        a.parked = max(100, want - 2000)
        log("RLIMIT_NOFILE %d: parked requests reduced to %d" % (want, a.parked))

    info = machine_info()
    info["busy"] = busy_processes()
    info["command"] = " ".join(["/usr/bin/python3", os.path.relpath(os.path.abspath(sys.argv[0]), REPO)] + sys.argv[1:])
    try:
        info["politeproxy"] = subprocess.run([a.binary, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             text=True, timeout=10).stdout.strip().splitlines()[0]
    except Exception:
        info["politeproxy"] = "?"
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        info["commit"] = commit + ("+dirty" if dirty else "")
    except Exception:
        info["commit"] = "?"
    if info["busy"] or float(info["loadavg_start"][0]) > 0.5:
        log("warning: the machine is not quiet (load %s; %s): figures are smoke checks only"
            % (info["loadavg_start"][0], ", ".join(info["busy"]) or "no compiler seen"))

    workdir = tempfile.mkdtemp(prefix="politeproxy-bench-")
    os.chmod(workdir, 0o755)  # nginx workers run as an unprivileged user
    bench = Bench(a, workdir)

    def on_signal(signo, _frame):
        raise Interrupted("signal %d" % signo)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    t0 = time.monotonic()
    interrupted = False
    try:
        bench.run()
    except (KeyboardInterrupt, Interrupted) as e:
        interrupted = True
        bench.fail("benchmark", "interrupted (%s)" % (e or "Ctrl-C"))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        bench.procs.stop_all()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    elapsed = time.monotonic() - t0

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or "/tmp/politeproxy-bench-%s.md" % stamp
    # The raw figures first: a report that fails to render loses no run.
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"info": info, "args": vars(a), "results": bench.results, "failures": bench.failures,
                   "elapsed_s": elapsed}, f, indent=1, default=str)
    text = summarize(bench, info, a, elapsed)
    with open(out, "w") as f:
        f.write(text + "\n")
    print(text)
    print("\nreport: %s (raw figures: %s.json)" % (out, os.path.splitext(out)[0]))
    if bench.failures and not a.keep_tmp:
        a.keep_tmp = True
        print("logs and configs kept in %s (there were failures)" % workdir)
    if not a.keep_tmp:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not bench.failures:
        print("logs and configs kept in %s" % workdir)
    sys.exit(1 if bench.failures or interrupted else 0)


if __name__ == "__main__":
    main()
