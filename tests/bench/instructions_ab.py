#!/usr/bin/python3
"""Instructions per forwarded request, counted by callgrind, for two politeproxy
binaries: the deterministic half of an A/B (the pass-through benchmark's CPU figures
move by 10% and more between repeats on a shared machine; instruction counts do not).

    /usr/bin/python3 tests/bench/instructions_ab.py BEFORE AFTER [--seconds 8] [--connections 16]

Each binary runs under `valgrind --tool=callgrind --instr-atstart=no` with the
pass-through config (one host, limits wide open, every request through its gate) in
front of nginx serving 1 KiB; wrk warms it up, then instrumentation is switched on
(callgrind_control -i on) for --seconds of load and off again. Instructions (Ir, user
space: the kernel's share is the same four system calls per request for both) are
divided by the requests politeproxy_requests_total counted in that window. Needs the
bench packages (scripts/install-deps.sh --bench) and valgrind."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as B  # noqa: E402


def measure(bench, binary, name, seconds, conns, keep):
    cfg = bench.write(name + ".yaml", B.cost_config())
    out = os.path.join(keep or bench.dir, name + ".callgrind")
    proc = bench.procs.start(name, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                    "--callgrind-out-file=" + out, binary, "--config", cfg], B.PROXY_CPU)
    m = B.wait_log_line(proc, B.LISTEN_RE, timeout=60)
    port, admin = int(m.group(2)), int(m.group(4))
    origin = "http://127.0.0.1:%d/1k" % bench.nginx_port
    proxy = "http://127.0.0.1:%d/" % port
    requests = lambda: B.metric_sum(B.parse_metrics(B.http_get("http://127.0.0.1:%d/metrics" % admin)),
                                    "politeproxy_requests_total")
    bench.run_wrk(proxy, conns, 2, "passthrough.lua", ["proxy", origin, 1024])  # warm-up, not counted
    before = requests()
    subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
    bench.run_wrk(proxy, conns, seconds, "passthrough.lua", ["proxy", origin, 1024])
    subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
    counted = requests() - before
    bench.procs.stop(proc, grace=30)
    return callgrind_total(out), counted


def callgrind_total(path):
    """The instructions a callgrind file counted while instrumentation was on."""
    with open(path) as f:
        return int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))


def keep_dir(path):
    """--keep's directory, made and absolute (None: the files go with the run)."""
    if not path:
        return None
    os.makedirs(path, exist_ok=True)
    return os.path.abspath(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files there (for callgrind_annotate)")
    a = ap.parse_args()
    a.keep = keep_dir(a.keep)
    with tempfile.TemporaryDirectory(prefix="pp-ab-") as d:
        os.chmod(d, 0o755)  # nginx workers run as www-data
        bench = B.Bench(argparse.Namespace(polite_delay=0.1, scenarios=["passthrough"]), d)
        try:
            bench.start_nginx()
            rows = []
            for name, binary in (("before", os.path.abspath(a.before)), ("after", os.path.abspath(a.after))):
                total, counted = measure(bench, binary, name, a.seconds, a.connections, a.keep)
                B.log("%s: %d instructions over %d requests" % (name, total, counted))
                rows.append((name, binary, total, counted, total / max(counted, 1)))
        finally:
            bench.procs.stop_all()
    print("| binary | requests counted | instructions | per request |")
    print("|---|---:|---:|---:|")
    for name, binary, total, counted, per in rows:
        print("| %s (%s) | %d | %d | %.0f |" % (name, binary, counted, total, per))
    print("after/before: %.3f" % (rows[1][4] / rows[0][4]))


if __name__ == "__main__":
    main()
