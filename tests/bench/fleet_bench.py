#!/usr/bin/python3
"""Fleet benchmark: what the Redis lease costs per request, side by side with the same
proxy without a fleet, on one Redis and on a Redis Cluster, in one run.

    /usr/bin/python3 tests/bench/fleet_bench.py [--duration 10] [--repeats 3]
        [--hosts 1,1000] [--modes off,single,single-base,cluster] [--base-binary PATH]

One politeproxy per mode (workers: 1, on core 1), limits wide open, before nginx (1 KiB
static file), loaded by wrk with 64 keep-alive connections rotating over 1 host or over
1000 host names (hN.bench.test). Modes:
  off          build/politeproxy without `fleet:`
  single       build/politeproxy on a redis-server of its own (redis://127.0.0.1:PORT/0)
  single-base  the same with --base-binary (the code before a change, e.g. before
               acquires were batched per host), on another redis-server of its own;
               left out, with a note, when --base-binary is not given or not there
  cluster      build/politeproxy on a Redis Cluster of three masters of its own
               (redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3)
Every Redis process runs on core 0 beside wrk and nginx. Each mode has its own store, so
a cell counts only the commands and CPU of the store its proxy uses. Cells (hosts x mode)
run interleaved, in an order rotated each repeat, `--repeats` times; medians are reported.
Measured per cell:
  - req/s, p50 and p99 latency (wrk), and the latency added over `off`;
  - proxy CPU per request (utime + stime of the proxy over the run / responses);
  - Redis commands per request (INFO commandstats: EVALSHA + EVAL calls, and for the
    binary before batching its release ZREMs; today's scripts run ZREM inside, which
    commandstats cannot tell apart, summed over the store's nodes, over responses) and
    Redis CPU per request (all
    its nodes); the JSON has every command's calls per request, scripts' inner ones too;
  - the store's memory per idle host (INFO memory with the hosts' keys and without, after
    every cell has run).
Goals (issue 29): with one Redis, throughput >= 0.85 of `off` with 1 and 1000 hosts and at
most 1 Redis command per request (acquires batched per host per event-loop turn; a release
lingers 2 ms so that the host's next acquire carries it; a busy host's lease is handed on
to the process's next request of the host with a spare token, without the store). Commands/req is read to two
decimals: the acquires of the requests in flight when wrk stops add ~64 / responses. The
cluster rows are held to the same goals; single-base shows what it was before.
Writes a markdown report to /tmp/politeproxy-fleet-bench-DATE.md (and .json)."""

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as RB  # noqa: E402
import bench_redis  # noqa: E402

MODES = ["off", "single", "single-base", "cluster"]
THROUGHPUT_GOAL, COMMANDS_GOAL = 0.85, 1.0
FLEET = "fleet: {redis: \"%s\", lease_ttl: 30s, expected_workers: 1, timeout: 1s}"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of every cell (median)")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--hosts", default="1,1000", help="comma list of host counts")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of %s" % ",".join(MODES))
    ap.add_argument("--binary", default=os.path.join(RB.REPO, "build", "politeproxy"))
    ap.add_argument("--base-binary", default=None, help="the politeproxy of mode single-base")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    try:
        a.hosts = [int(h) for h in a.hosts.split(",") if h.strip()]
    except ValueError:
        ap.error("--hosts: a comma list of numbers")
    a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    for m in a.modes:
        if m not in MODES:
            ap.error("unknown mode %r (modes: %s)" % (m, ",".join(MODES)))
    if not a.hosts or not a.modes or min(a.hosts) < 1:
        ap.error("at least one host count (>= 1) and one mode")
    if "single-base" in a.modes and not (a.base_binary and os.access(a.base_binary, os.X_OK)):
        RB.log("note: mode single-base skipped: %s" % (
            "no --base-binary given" if not a.base_binary else "%s is not an executable" % a.base_binary))
        a.modes.remove("single-base")
    # What run_bench's helpers read from their args.
    a.polite_delay, a.scenarios, a.keep_tmp = 0.1, ["passthrough"], False
    return a


def start_targets(bench, a):
    """{mode: (proxy, store or None)}; a mode whose store or proxy does not start is a
    failure and is left out of the run."""
    starts = {"single": bench_redis.start_single, "single-base": bench_redis.start_single,
              "cluster": bench_redis.start_cluster}
    targets = {}
    for m in a.modes:
        try:
            store = starts[m](bench.procs, bench.dir, "redis-" + m) if m in starts else None
            if store and m == "single-base":
                store.client_release = True
            proxy = bench.start_politeproxy("pp-" + m, RB.render("politeproxy-fleet.yaml.in",
                                                                 fleet=FLEET % store.url if store else ""),
                                            binary=a.base_binary if m == "single-base" else None)
            targets[m] = (proxy, store)
        except (KeyboardInterrupt, RB.Interrupted):
            raise
        except Exception as e:
            bench.fail("mode %s" % m, "does not start: %s: %s" % (type(e).__name__, e))
    return targets


def wrk_args(bench, h):
    return ["rotate", bench.nginx_port, "/1k", h, 1, 1024, "h"]


def run_cell(bench, a, h, m, proxy, store):
    """One run of one cell: wrk's figures plus the proxy's and its store's costs."""
    s0 = store.stats() if store else None
    cpu0 = RB.proc_cpu_seconds(proxy.pid)
    rcpu0 = store.cpu_seconds() if store else 0.0
    res = bench.run_wrk("http://127.0.0.1:%d/" % proxy.port, a.connections, a.duration, "hosts.lua", wrk_args(bench, h))
    n = max(1, res.get("requests", 0))
    run = {"rps": res.get("rps", 0), "p50_us": res.get("p50_us"), "p99_us": res.get("p99_us"),
           "requests": res.get("requests", 0), "cpu_us": (RB.proc_cpu_seconds(proxy.pid) - cpu0) * 1e6 / n,
           "error": res.get("error")}
    if store:
        time.sleep(0.3)  # the last releases (lingering 2 ms at most) reach the store
        s1 = store.stats()
        run.update({"redis_cpu_us": (store.cpu_seconds() - rcpu0) * 1e6 / n,
                    "commands": (s1["lease_calls"] - s0["lease_calls"]) / n,
                    "keys": s1["keys"], "by_command": {  # per request, scripts' inner calls included
                        k: (v - s0["calls"].get(k, 0)) / n for k, v in s1["calls"].items() if v > s0["calls"].get(k, 0)}})
    if res.get("error"):
        bench.fail("%d hosts, %s" % (h, m), res["error"])
    RB.log("%4d hosts %-11s: %7.0f req/s p50 %5.0f us p99 %6.0f us, %5.1f us CPU/req%s" % (
        h, m, run["rps"], run["p50_us"] or 0, run["p99_us"] or 0, run["cpu_us"],
        ", %.3f commands/req, %.1f us Redis CPU/req, %d keys; per req %s" % (
            run["commands"], run["redis_cpu_us"], run["keys"], " ".join(
                "%s %.3f" % kv for kv in sorted(run["by_command"].items(), key=lambda kv: -kv[1])[:8]))
        if store else ""))
    return run


def store_memory(store):
    """The store's memory per key after the cells: used_memory with the hosts' keys (no
    lease is left; each host keeps its bucket hash until shared_state_ttl) minus empty."""
    with_keys = store.stats()
    store.flushall()
    empty = store.stats()
    return {"keys": with_keys["keys"], "used_memory_with": with_keys["used_memory"],
            "used_memory_empty": empty["used_memory"],
            "bytes_per_idle_host": (with_keys["used_memory"] - empty["used_memory"]) / max(1, with_keys["keys"])}


def main():
    a = parse_args()
    for tool in ["wrk", "nginx"] + (["redis-server"] if set(a.modes) - {"off"} else []) + (
            ["redis-cli"] if "cluster" in a.modes else []):
        if not shutil.which(tool):
            sys.exit("%s not found (scripts/install-deps.sh --bench; redis-server and redis-cli: apt redis-server)" % tool)
    if not os.access(a.binary, os.X_OK):
        sys.exit("%s not found: build politeproxy first" % a.binary)
    if (os.cpu_count() or 1) < 2:
        RB.plan.LOAD_CPU = RB.plan.PROXY_CPU = 0
        RB.log("warning: one core only: load and proxy share it")
    os.sched_setaffinity(0, {RB.plan.LOAD_CPU})  # the orchestrator stays off the proxy's core
    workdir = tempfile.mkdtemp(prefix="pp-fleet-bench-")
    os.chmod(workdir, 0o755)  # nginx workers run as an unprivileged user
    bench = RB.Bench(a, workdir)

    def on_signal(signo, _frame):
        raise RB.Interrupted("signal %d" % signo)

    signal.signal(signal.SIGTERM, on_signal)
    started, load_start = time.monotonic(), os.getloadavg()[0]
    runs = {}
    memory = {}

    def body():
        nonlocal runs
        bench.start_nginx()
        targets = start_targets(bench, a)
        cells = [(h, m) for h in a.hosts for m in a.modes if m in targets]
        runs = {c: [] for c in cells}
        for h, m in cells:  # warm-up: connections, pools, host state, the cluster's slot map
            bench.run_wrk("http://127.0.0.1:%d/" % targets[m][0].port, a.connections, 1, "hosts.lua", wrk_args(bench, h))
        for rep in range(a.repeats):
            order = cells[rep % len(cells):] + cells[:rep % len(cells)] if cells else []
            for h, m in order:
                runs[(h, m)].append(run_cell(bench, a, h, m, *targets[m]))
        for m, (_, store) in targets.items():
            if store:
                memory[m] = store_memory(store)
    bench.guarded(body)
    report(a, runs, memory, time.monotonic() - started, load_start, bench.failures)
    if bench.failures:
        print("logs and configs kept in %s (there were failures)" % workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bench.failures else 0


def med(runs, key):
    return RB.median([r.get(key) for r in runs if not r.get("error")])


def fmt(x, spec):
    return "–" if x is None else spec % x


def diff(a, b):
    return None if a is None or b is None else a - b


def quot(a, b):
    return None if a is None or not b else a / b


def verdict(x, ok, mode):
    if x is None:
        return ""
    return " (before)" if mode == "single-base" else " met" if ok(x) else " MISSED"


def cell_medians(runs, h, m):
    r = runs.get((h, m), [])
    good = [x for x in r if not x.get("error") and "by_command" in x]
    split = {c: RB.median([x["by_command"].get(c, 0) for x in good]) for c in ("evalsha", "eval", "zrem")}
    return {k: med(r, k) for k in ("rps", "p50_us", "p99_us", "cpu_us", "commands", "redis_cpu_us")} | {
        "runs": len(r), "failed": sum(1 for x in r if x.get("error")), "split": {c: v for c, v in split.items() if v}}


def commands_cell(c):
    """'2.004 (1.002 EVALSHA + 1.002 ZREM)': the lease commands per request, by name."""
    parts = " + ".join("%.3f %s" % (v, k.upper()) for k, v in c["split"].items())
    return fmt(c["commands"], "%.3f") + (" (%s)" % parts if parts else "")


def report(a, runs, memory, elapsed, load_start, failures):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or "/tmp/politeproxy-fleet-bench-%s.md" % stamp
    modes = [m for m in MODES if any((h, m) in runs for h in a.hosts)]
    lines = ["# politeproxy fleet benchmark (%s)" % stamp, "",
             "1 KiB, %d connections, %d s per run, %d interleaved repeats (medians), one worker on core 1; "
             "nginx, wrk and every redis-server on core 0. Load average at start %.2f. %.0f s in all."
             % (a.connections, a.duration, a.repeats, load_start, elapsed),
             "Modes: %s.%s" % (", ".join(modes), " single-base: %s" % a.base_binary if "single-base" in modes else ""),
             "", "| hosts | mode | req/s | p50 µs | p99 µs | added p50 | added p99 | proxy CPU µs/req "
                 "| Redis commands/req | Redis CPU µs/req |", "|---|---|---|---|---|---|---|---|---|---|"]
    cells, summary = {}, {}
    for h in a.hosts:
        off = cell_medians(runs, h, "off") if (h, "off") in runs else {}
        for m in modes:
            if (h, m) not in runs:
                continue
            c = cells["%d-%s" % (h, m)] = cell_medians(runs, h, m)
            c["added_p50_us"] = diff(c["p50_us"], off.get("p50_us")) if m != "off" else None
            c["added_p99_us"] = diff(c["p99_us"], off.get("p99_us")) if m != "off" else None
            lines.append("| %d | %s%s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                h, m, " (%d of %d runs failed)" % (c["failed"], c["runs"]) if c["failed"] else "",
                fmt(c["rps"], "%.0f"), fmt(c["p50_us"], "%.0f"), fmt(c["p99_us"], "%.0f"),
                fmt(c["added_p50_us"], "%+.0f µs"), fmt(c["added_p99_us"], "%+.0f µs"), fmt(c["cpu_us"], "%.1f"),
                commands_cell(c) if m != "off" else "–", fmt(c["redis_cpu_us"], "%.1f")))
            if m != "off":
                summary["%d-%s" % (h, m)] = {
                    "throughput_ratio": quot(c["rps"], off.get("rps")), "added_p50_us": c["added_p50_us"],
                    "added_p99_us": c["added_p99_us"], "cpu_ratio": quot(c["cpu_us"], off.get("cpu_us")),
                    "commands": c["commands"]}
    lines += ["", "| hosts | mode | throughput / off (goal >= %.2f) | added p50 | added p99 | proxy CPU/req / off "
                  "| Redis commands/req (goal <= %g) |" % (THROUGHPUT_GOAL, COMMANDS_GOAL), "|---|---|---|---|---|---|---|"]
    for key, s in summary.items():
        h, m = key.split("-", 1)
        lines.append("| %s | %s | %s%s | %s | %s | %s | %s%s |" % (
            h, m, fmt(s["throughput_ratio"], "%.2f"),
            verdict(s["throughput_ratio"], lambda x: x >= THROUGHPUT_GOAL, m),
            fmt(s["added_p50_us"], "%+.0f µs"), fmt(s["added_p99_us"], "%+.0f µs"), fmt(s["cpu_ratio"], "%.2f"),
            fmt(s["commands"], "%.3f"), verdict(s["commands"], lambda x: round(x, 2) <= COMMANDS_GOAL, m)))
    if "off" not in modes and summary:
        lines += ["", "No `off` cells in this run: the ratios to it are empty."]
    if memory:
        lines += ["", "Store memory after every cell (%d hosts the most; no lease is left, each host keeps its "
                      "bucket hash; used_memory with the keys minus empty, over the store's nodes): %s." % (
                          max(a.hosts), "; ".join("%s %d keys, %s" % (m, v["keys"], "%.0f bytes each" % v["bytes_per_idle_host"]
                                                           if v["keys"] >= 100 else "too few to tell")
                                                  for m, v in memory.items()))]
    if failures:
        lines += ["", "## Failures", ""] + ["- " + f for f in failures]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"args": vars(a), "runs": {"%d-%s" % k: v for k, v in runs.items()}, "cells": cells,
                   "summary": summary, "memory": memory, "failures": failures}, f, indent=1)
    print(text)
    RB.log("report: %s" % out)


if __name__ == "__main__":
    sys.exit(main())
