#!/usr/bin/python3
"""DNS benchmark: names looked up through the proxy, resolved by a dnsmasq of the run's
own, side by side with the binary before the c-ares resolver (getaddrinfo on a pool of
8 threads, no cache) in the same run.

    /usr/bin/python3 tests/bench/dns_bench.py --base-binary PATH [--names 10000] [--repeats 3]

Runs as root in a network namespace of its own (unshare -n: loopback only, nothing can
leave the machine) and a mount namespace where /etc/resolv.conf names 127.0.0.1 (the
binary before reads only that), with dnsmasq on 127.0.0.1:53 answering n0 ..
n{NAMES-1}.bench.test with 127.0.0.1 (TTL 300 s; AAAA: no data), nginx the origin (1 KiB).
Both proxies run the same config (limits wide open, no `resolve:`), one worker on core 1.
Per binary and repeat, on a fresh proxy (an empty cache):
  lookups  each name requested once (wrk, hosts.lua "once", 64 connections): names per
           second (NAMES over the time until wrk's threads are done, read every 0.2 s)
           and proxy CPU per name;
  cached   one name, keep-alive pass-through for --duration seconds (hosts.lua rotate
           over 1 name): req/s and CPU per request.
Medians are reported, and the ratios new / before. Writes
/tmp/politeproxy-dns-bench-DATE.md (and .json)."""

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as RB  # noqa: E402

# Names go through dnsmasq: no resolve: table.
CONFIG = RB.cost_config(resolve=None)
BINARIES = ("new", "before")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--names", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds of the cached row")
    ap.add_argument("--binary", default=os.path.join(RB.REPO, "build", "politeproxy"))
    ap.add_argument("--base-binary", required=True, help="the politeproxy before the c-ares resolver")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    for b in (a.binary, a.base_binary):
        if not os.access(b, os.X_OK):
            ap.error("%s is not an executable" % b)
    a.polite_delay, a.scenarios, a.keep_tmp = 0.1, ["passthrough"], False  # what Bench reads
    return a


def enter_namespaces():
    """Re-runs this script in new network and mount namespaces (once)."""
    if os.environ.get("DNS_BENCH_INSIDE") == "1":
        return
    if os.geteuid() != 0:
        sys.exit("run as root: the benchmark makes a network namespace of its own")
    env = dict(os.environ, DNS_BENCH_INSIDE="1")
    os.execvpe("unshare", ["unshare", "--net", "--mount", "--propagation", "private", "--",
                           sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


def set_up_namespace(workdir):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    resolv = os.path.join(workdir, "resolv.conf")
    with open(resolv, "w") as f:
        f.write("nameserver 127.0.0.1\noptions attempts:1 timeout:2\n")
    subprocess.run(["mount", "--bind", resolv, "/etc/resolv.conf"], check=True)


def start_dnsmasq(bench, workdir, names):
    hosts = os.path.join(workdir, "dns-hosts")
    with open(hosts, "w") as f:
        for i in range(names):
            f.write("127.0.0.1 n%d.bench.test\n" % i)
    proc = bench.procs.start("dnsmasq", ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
                                         "--port=53", "--listen-address=127.0.0.1", "--bind-interfaces",
                                         "--addn-hosts=" + hosts, "--auth-zone=bench.test",
                                         "--auth-server=ns.bench.test,127.0.0.1", "--auth-ttl=300",
                                         "--local-ttl=300", "--cache-size=0", "--pid-file=", "--user=",
                                         "--conf-file=/dev/null"], RB.plan.LOAD_CPU)
    time.sleep(0.5)
    if not proc.alive():
        raise RuntimeError("dnsmasq did not start: " + proc.log_tail())
    return proc


_started = [0]


def fresh_name(prefix):
    """A process name of its own per run (its log is read for the listening line)."""
    _started[0] += 1
    return "%s-%d" % (prefix, _started[0])


def lookups_run(bench, a, binary):
    """A fresh proxy; every name once: (names/s, CPU µs per name)."""
    pp = bench.start_politeproxy(fresh_name("pp-lookups"), CONFIG, binary=binary)
    try:
        cpu0, t0 = RB.proc_cpu_seconds(pp.pid), time.monotonic()
        w = bench.run_wrk("http://127.0.0.1:%d/" % pp.port, 64, 300, "hosts.lua",
                          ["once", bench.nginx_port, "/1k", a.names, 1, 1024, "n"], until=RB.wrk_threads_done())
        took, cpu = time.monotonic() - t0, RB.proc_cpu_seconds(pp.pid) - cpu0
        if w.get("error"):
            bench.fail("lookups (%s)" % binary, w["error"])
        return {"names_per_s": a.names / took, "cpu_us": cpu * 1e6 / a.names, "seconds": took,
                "requests": w.get("requests")}
    finally:
        bench.procs.stop(pp)


def cached_run(bench, a, binary):
    """A fresh proxy; one name, keep-alive: (req/s, CPU µs per request)."""
    pp = bench.start_politeproxy(fresh_name("pp-cached"), CONFIG, binary=binary)
    try:
        bench.run_wrk("http://127.0.0.1:%d/" % pp.port, 64, 1, "hosts.lua", ["rotate", bench.nginx_port, "/1k", 1, 1, 1024, "n"])
        cpu0 = RB.proc_cpu_seconds(pp.pid)
        w = bench.run_wrk("http://127.0.0.1:%d/" % pp.port, 64, a.duration, "hosts.lua",
                          ["rotate", bench.nginx_port, "/1k", 1, 1, 1024, "n"])
        cpu = RB.proc_cpu_seconds(pp.pid) - cpu0
        if w.get("error"):
            bench.fail("cached (%s)" % binary, w["error"])
        n = max(1, w.get("requests", 0))
        return {"rps": w.get("rps", 0), "cpu_us": cpu * 1e6 / n, "p99_us": w.get("p99_us")}
    finally:
        bench.procs.stop(pp)


def main():
    enter_namespaces()
    a = parse_args()
    for tool in ("wrk", "nginx", "dnsmasq", "ip"):
        if not shutil.which(tool):
            sys.exit("%s not found (scripts/install-deps.sh --bench)" % tool)
    os.sched_setaffinity(0, {RB.plan.LOAD_CPU})
    workdir = tempfile.mkdtemp(prefix="pp-dns-bench-")
    os.chmod(workdir, 0o755)
    bench = RB.Bench(a, workdir)
    signal.signal(signal.SIGTERM, lambda signo, _f: (_ for _ in ()).throw(RB.Interrupted("signal %d" % signo)))
    runs = {b: {"lookups": [], "cached": []} for b in BINARIES}
    started = time.monotonic()

    def body():
        set_up_namespace(workdir)
        start_dnsmasq(bench, workdir, a.names)
        bench.start_nginx()
        binaries = {"new": a.binary, "before": a.base_binary}
        for rep in range(a.repeats):
            order = BINARIES if rep % 2 == 0 else BINARIES[::-1]
            for b in order:
                r = lookups_run(bench, a, binaries[b])
                runs[b]["lookups"].append(r)
                RB.log("%-6s lookups: %6.0f names/s, %6.1f µs CPU per name (%.2f s)"
                       % (b, r["names_per_s"], r["cpu_us"], r["seconds"]))
            for b in order:
                r = cached_run(bench, a, binaries[b])
                runs[b]["cached"].append(r)
                RB.log("%-6s cached : %6.0f req/s, %6.1f µs CPU per request" % (b, r["rps"], r["cpu_us"]))
    bench.guarded(body)
    report(a, runs, time.monotonic() - started, bench.failures)
    shutil.rmtree(workdir, ignore_errors=True) if not bench.failures else print("kept " + workdir)
    return 1 if bench.failures else 0


def report(a, runs, elapsed, failures):
    med = {b: {row: {k: RB.median([r[k] for r in runs[b][row]]) for k in (runs[b][row][0] if runs[b][row] else {})}
               for row in ("lookups", "cached")} for b in BINARIES}

    def ratio(row, key):
        x, y = med["new"][row].get(key), med["before"][row].get(key)
        return "%.2f" % (x / y) if x and y else "–"

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or "/tmp/politeproxy-dns-bench-%s.md" % stamp
    lines = ["# politeproxy DNS benchmark (%s)" % stamp, "",
             "%d names once each (64 connections) and one name cached (%d s), %d repeats (medians); dnsmasq on "
             "127.0.0.1:53 in a network namespace of the run's own; one proxy worker on core 1. %.0f s in all."
             % (a.names, a.duration, a.repeats, elapsed), "",
             "| row | new | before (getaddrinfo) | new / before |", "|---|---|---|---|"]
    for row, key, what in (("lookups", "names_per_s", "names/s"), ("lookups", "cpu_us", "CPU µs per name"),
                           ("cached", "rps", "cached name, req/s"), ("cached", "cpu_us", "cached name, CPU µs/request")):
        x, y = med["new"][row].get(key), med["before"][row].get(key)
        lines.append("| %s | %s | %s | %s |" % (what, "–" if x is None else "%.1f" % x, "–" if y is None else "%.1f" % y,
                                               ratio(row, key)))
    if failures:
        lines += ["", "Failures:"] + ["- " + f for f in failures]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    with open(out[:-3] + ".json", "w") as f:
        json.dump({"runs": runs, "medians": med}, f, indent=1)
    print(text)
    RB.log("report: " + out)


if __name__ == "__main__":
    sys.exit(main())
