#!/usr/bin/python3
"""Fleet benchmark: what the Redis lease costs per request, side by side with the same
proxy without a fleet, in one run.

    /usr/bin/python3 tests/bench/fleet_bench.py [--duration 10] [--repeats 3]

One politeproxy (workers: 1, on core 1 alone) with limits wide open, before nginx (1 KiB
static file), loaded by wrk with 64 keep-alive connections rotating over 1 host or over
1000 host names (hN.bench.test), with and without `fleet:` (a redis-server of the
bench's own on core 0, beside wrk and nginx). Cells run interleaved, `--repeats` times;
medians are reported. Measured per cell:
  - req/s, p50 and p99 latency (wrk), and the added latency with the fleet on;
  - proxy CPU per request (utime + stime of the proxy over the run / responses);
  - Redis commands per request (INFO commandstats: EVALSHA + EVAL + ZREM over responses) and
    Redis CPU per request;
  - the store's memory per host key (INFO memory before and after the 1000-host cells).
Goals (issue 12): throughput with the fleet >= 70% of without it, with 1 and 1000 hosts;
exactly 2 Redis commands per request (acquire and release; renewals only for requests
longer than a third of lease_ttl, which these are not).
Writes a markdown report to /tmp/politeproxy-fleet-bench-DATE.md (and .json)."""

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as RB  # noqa: E402
import redis  # noqa: E402  (python3-redis)

HOSTS = [1, 1000]
MODES = ["off", "on"]


def redis_stats(client):
    calls = 0
    for name, st in client.info("commandstats").items():
        if name in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_zrem"):
            calls += st["calls"]
    return calls, client.info("memory")["used_memory"], client.dbsize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--binary", default=os.path.join(RB.REPO, "build", "politeproxy"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    # What run_bench's helpers read from their args.
    a.polite_delay, a.scenarios, a.keep_tmp = 0.1, ["passthrough"], False
    workdir = tempfile.mkdtemp(prefix="pp-fleet-bench-")
    os.chmod(workdir, 0o755)  # nginx workers run as an unprivileged user
    bench = RB.Bench(a, workdir)
    started = time.monotonic()
    runs = {(h, m): [] for h in HOSTS for m in MODES}
    memory = {}
    try:
        bench.start_nginx()
        redis_port = RB.free_port()
        store = bench.procs.start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                            "--save", "", "--appendonly", "no", "--dir", workdir], RB.LOAD_CPU)
        RB.wait_port(redis_port, store)
        client = redis.Redis(host="127.0.0.1", port=redis_port)
        fleet = ("fleet: {redis: \"redis://127.0.0.1:%d/0\", lease_ttl: 30s, expected_workers: 1, timeout: 1s}"
                 % redis_port)
        proxies = {
            "off": bench.start_politeproxy("fleet-off", RB.render("politeproxy-fleet.yaml.in", fleet="")),
            "on": bench.start_politeproxy("fleet-on", RB.render("politeproxy-fleet.yaml.in", fleet=fleet)),
        }
        cells = [(h, m) for h in HOSTS for m in MODES]
        for h, m in cells:  # warm-up: connections, pools, host state
            bench.run_wrk("http://127.0.0.1:%d/" % proxies[m].port, a.connections, 1, "hosts.lua",
                          ["rotate", bench.nginx_port, "/1k", h, 1, 1024, "h"])
        for rep in range(a.repeats):
            order = cells[rep % len(cells):] + cells[:rep % len(cells)]
            for h, m in order:
                proxy = proxies[m]
                calls0, mem0, keys0 = redis_stats(client)
                cpu0 = RB.proc_cpu_seconds(proxy.pid)
                rcpu0 = RB.proc_cpu_seconds(store.pid)
                res = bench.run_wrk("http://127.0.0.1:%d/" % proxy.port, a.connections, a.duration, "hosts.lua",
                                    ["rotate", bench.nginx_port, "/1k", h, 1, 1024, "h"])
                time.sleep(0.3)  # the last releases reach the store
                calls1, mem1, keys1 = redis_stats(client)
                n = max(1, res.get("requests", 0))
                run = {"rps": res.get("rps", 0), "p50_us": res.get("p50_us"), "p99_us": res.get("p99_us"),
                       "cpu_us": (RB.proc_cpu_seconds(proxy.pid) - cpu0) * 1e6 / n,
                       "redis_cpu_us": (RB.proc_cpu_seconds(store.pid) - rcpu0) * 1e6 / n,
                       "commands": (calls1 - calls0) / n, "keys": keys1, "error": res.get("error")}
                if res.get("error"):
                    bench.fail("%d hosts, fleet %s" % (h, m), res["error"])
                runs[(h, m)].append(run)
                RB.log("%4d hosts fleet %-3s: %7.0f req/s p50 %5.0f us p99 %6.0f us, %5.1f us CPU/req, "
                       "%.3f commands/req, %d keys" % (h, m, run["rps"], run["p50_us"] or 0, run["p99_us"] or 0,
                                                      run["cpu_us"], run["commands"], keys1))
        # The store's memory per host: state left by the 1000-host cells (leases are all
        # back; each host keeps its bucket hash until shared_state_ttl).
        client_mem = client.info("memory")["used_memory"]
        client.flushall()
        memory = {"keys_after": runs[(1000, "on")][-1]["keys"], "used_memory_with": client_mem,
                  "used_memory_empty": client.info("memory")["used_memory"]}
    finally:
        bench.procs.stop_all()
    report(a, runs, memory, time.monotonic() - started, bench.failures)
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bench.failures else 0


def med(runs, key):
    return RB.median([r[key] for r in runs if r.get(key) is not None])


def report(a, runs, memory, elapsed, failures):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or "/tmp/politeproxy-fleet-bench-%s.md" % stamp
    lines = ["# politeproxy fleet benchmark (%s)" % stamp, "",
             "1 KiB, %d connections, %d s per run, %d interleaved repeats (medians), one worker on core 1; "
             "nginx, wrk and redis-server on core 0. %.0f s in all." % (a.connections, a.duration, a.repeats, elapsed),
             "", "| hosts | fleet | req/s | p50 µs | p99 µs | proxy CPU µs/req | Redis commands/req | Redis CPU µs/req |",
             "|---|---|---|---|---|---|---|---|"]
    summary = {}
    for h in HOSTS:
        for m in MODES:
            r = runs[(h, m)]
            lines.append("| %d | %s | %.0f | %.0f | %.0f | %.1f | %.3f | %.1f |" % (
                h, m, med(r, "rps"), med(r, "p50_us"), med(r, "p99_us"), med(r, "cpu_us"), med(r, "commands"),
                med(r, "redis_cpu_us")))
        on, off = runs[(h, "on")], runs[(h, "off")]
        summary[h] = {"throughput_ratio": med(on, "rps") / med(off, "rps"),
                      "added_p50_us": med(on, "p50_us") - med(off, "p50_us"),
                      "added_p99_us": med(on, "p99_us") - med(off, "p99_us"),
                      "cpu_ratio": med(on, "cpu_us") / med(off, "cpu_us"),
                      "commands": med(on, "commands")}
    lines += ["", "| hosts | throughput on/off (goal >= 0.70) | added p50 | added p99 | CPU/req on/off | commands/req (goal 2) |",
              "|---|---|---|---|---|---|"]
    for h, s in summary.items():
        lines.append("| %d | %.2f %s | %+.0f µs | %+.0f µs | %.2f | %.3f %s |" % (
            h, s["throughput_ratio"], "met" if s["throughput_ratio"] >= 0.70 else "MISSED", s["added_p50_us"],
            s["added_p99_us"], s["cpu_ratio"], s["commands"], "met" if abs(s["commands"] - 2) < 0.01 else "MISSED"))
    if memory:
        per_key = (memory["used_memory_with"] - memory["used_memory_empty"]) / max(1, memory["keys_after"])
        memory["bytes_per_idle_host"] = per_key
        lines += ["", "Store memory after the 1000-host cells: %d keys (one bucket hash per host; no lease "
                  "is left), %.0f bytes each (used_memory with them minus empty)." % (memory["keys_after"], per_key)]
    if failures:
        lines += ["", "## Failures", ""] + ["- " + f for f in failures]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    with open(out.replace(".md", ".json"), "w") as f:
        json.dump({"runs": {"%d-%s" % k: v for k, v in runs.items()}, "summary": summary, "memory": memory}, f, indent=1)
    print(text)
    RB.log("report: %s" % out)


if __name__ == "__main__":
    sys.exit(main())
