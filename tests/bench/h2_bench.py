#!/usr/bin/python3
"""HTTP/2 front ends side by side, in one run: h2load (nghttp2-client) speaks h2c with
prior knowledge to each target, 100 streams per connection, 1 KiB responses from nginx,
with `:authority` naming the origin (what politeproxy gates on). Targets:
  direct            h2load straight to nginx's h2c port (the load's own reference)
  politeproxy/h1    politeproxy, HTTP/1.1 pool to nginx (every stream gated)
  politeproxy/h2    politeproxy, one h2c session to nginx (upstream_protocol: h2c)
  haproxy/h1        HAProxy 2.6, h2c front end, HTTP/1.1 back end (no gate)
  haproxy/h2        HAProxy 2.6, h2c front end, h2 back end
  nghttpx/h1        nghttpx, h2c front end, HTTP/1.1 back end
  nghttpx/h2        nghttpx, h2c front end, h2 back end
CPU per request = the front end's user+system CPU seconds (from /proc) over the requests
h2load completed; the proxy runs on one core, nginx and h2load on the other; each cell
is the median of --repeats interleaved runs. Ratios are against HAProxy with the same
back-end protocol. Installs nghttp2-client and nghttp2-proxy when missing.

  /usr/bin/python3 tests/bench/h2_bench.py --binary build/politeproxy [--requests 200000] [--repeats 3]
  /usr/bin/python3 tests/bench/h2_bench.py --variant base=OLD/build/politeproxy --skip nghttpx   # an A/B in one run

--syscalls also counts, for each target's own process (perf stat on the syscalls
tracepoints, as kernel_ab.py does; not for nghttpx, whose workers are its children),
system calls by kind per request and its user and system CPU apart, in a second table.

--variant NAME=BINARY adds politeproxy-NAME/h1 and /h2 (another build, or a wrapper script
that execs one, e.g. with LD_PRELOAD) to the same interleaved run (the other benches call
their one such binary --base-binary; this one takes several); --skip drops targets
whose name starts with one of its comma-separated prefixes.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_http import free_port  # noqa: E402 (never the same port twice)
from bench_plan import cost_config  # noqa: E402
import kernel_ab  # noqa: E402 (--syscalls: its perf counting)

PROXY_CPU, LOAD_CPU = 1, 0


def politeproxy_config(port, admin_port, h2):
    return cost_config(listen="127.0.0.1:%d" % port, admin_listen="127.0.0.1:%d" % admin_port,
                       limits={"h2_max_concurrent_streams": 1000},
                       defaults={"upstream_protocol": "h2c"} if h2 else {})


def wait_port(port, proc, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d not listening" % port)


def cpu_seconds(pid):
    """User+system CPU of `pid` and its descendants (nghttpx works in a child process)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as f:
            total += sum(cpu_seconds(int(c)) for c in f.read().split())
    return total


def start(argv, cpu, log):
    return subprocess.Popen(["taskset", "-c", str(cpu)] + argv, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def stop(p):
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def start_origin(work, log):
    """nginx serving /1k (1 KiB) from `work` on core LOAD_CPU, over HTTP/1.1 and h2c:
    (process, HTTP/1.1 port, h2c port), both ports listening."""
    www = os.path.join(work, "www")
    os.makedirs(www)
    with open(os.path.join(www, "1k"), "wb") as f:
        f.write((b"0123456789abcdef" * 64)[:1024])
    os.chmod(work, 0o755)
    os.chmod(www, 0o755)
    h1_port, h2_port = free_port(), free_port()
    nginx_conf = os.path.join(work, "nginx.conf")
    with open(nginx_conf, "w") as f:
        f.write("""worker_processes 1; daemon off; pid %(d)s/nginx.pid; error_log %(d)s/nginx-error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; http2_max_concurrent_streams 1000;
  server { listen 127.0.0.1:%(h1)d; root %(d)s/www; }
  server { listen 127.0.0.1:%(h2)d http2; root %(d)s/www; } }
""" % {"d": work, "h1": h1_port, "h2": h2_port})
    nginx = start(["nginx", "-p", work, "-c", nginx_conf, "-e", os.path.join(work, "nginx-error.log")], LOAD_CPU, log)
    wait_port(h1_port, nginx)
    wait_port(h2_port, nginx)
    return nginx, h1_port, h2_port


def h2load(port, origin_port, requests, clients=4, streams=100):
    """h2load's command on core LOAD_CPU: `requests` GETs of /1k through `port`, `:authority` the origin."""
    return ["taskset", "-c", str(LOAD_CPU), "h2load", "-n", str(requests), "-c", str(clients), "-m", str(streams),
            "-H", ":authority: origin.bench.test:%d" % origin_port, "http://127.0.0.1:%d/1k" % port]


def ensure_tools():
    missing = [pkg for tool, pkg in (("h2load", "nghttp2-client"), ("nghttpx", "nghttp2-proxy"))
               if not shutil.which(tool)]
    if missing:
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing, check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/politeproxy")
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--clients", type=int, default=4, help="h2load connections")
    ap.add_argument("--streams", type=int, default=100, help="concurrent streams per connection")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=BINARY",
                    help="another politeproxy binary in the same run (repeatable)")
    ap.add_argument("--skip", default="", help="comma-separated target name prefixes to leave out")
    ap.add_argument("--syscalls", action="store_true", help="also system calls per request and user/system CPU apart")
    a = ap.parse_args()
    if a.syscalls and not kernel_ab.perf_usable():
        ap.error("--syscalls needs perf with the syscalls tracepoints")
    variants = [v.split("=", 1) for v in a.variant]
    if any(len(v) != 2 or not v[0] for v in variants):
        ap.error("--variant takes NAME=BINARY")
    ensure_tools()
    work = tempfile.mkdtemp(prefix="h2bench-")
    log = open(os.path.join(work, "processes.log"), "wb")
    procs = []
    try:
        nginx, h1_port, h2_port = start_origin(work, log)
        procs.append(nginx)

        targets = {}

        # The cost benchmarks' one config (bench_plan.cost_config: limits wide open, no
        # adaptive limit), with this bench's ports and 1000 streams per client connection.
        def politeproxy(name, h2, binary=None):
            cfg = os.path.join(work, name.replace("/", "-") + ".yaml")
            port, admin = free_port(), free_port()
            with open(cfg, "w") as f:
                f.write(politeproxy_config(port, admin, h2))
            return [binary or a.binary, "--config", cfg], port

        def haproxy(name, h2):
            cfg = os.path.join(work, name.replace("/", "-") + ".cfg")
            port = free_port()
            with open(cfg, "w") as f:
                f.write("""global
    nbthread 1
    maxconn 5000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend h2c
    bind 127.0.0.1:%d proto h2
    default_backend origin
backend origin
    http-reuse always
    server nginx 127.0.0.1:%d %s
""" % (port, h2_port if h2 else h1_port, "proto h2" if h2 else ""))
            return ["haproxy", "-db", "-f", cfg], port

        def nghttpx(name, h2):
            port = free_port()
            backend = "127.0.0.1,%d;;proto=h2" % h2_port if h2 else "127.0.0.1,%d" % h1_port
            return ["nghttpx", "--frontend=127.0.0.1,%d;no-tls" % port, "--backend=" + backend, "--workers=1",
                    "--no-ocsp", "--conf=/dev/null", "--frontend-http2-max-concurrent-streams=1000",
                    "--errorlog-file=" + os.path.join(work, "nghttpx.log"), "--accesslog-file=/dev/null"], port

        for name, maker, h2 in (("politeproxy/h1", politeproxy, False), ("politeproxy/h2", politeproxy, True),
                                ("haproxy/h1", haproxy, False), ("haproxy/h2", haproxy, True),
                                ("nghttpx/h1", nghttpx, False), ("nghttpx/h2", nghttpx, True)):
            targets[name] = maker(name, h2)
        for variant, binary in variants:
            for h2 in (False, True):
                name = "politeproxy-%s/%s" % (variant, "h2" if h2 else "h1")
                targets[name] = politeproxy(name, h2, binary)
        skip = tuple(p.strip() for p in a.skip.split(",") if p.strip())
        targets = {name: t for name, t in targets.items() if not (skip and name.startswith(skip))}

        results = {}
        for rep in range(a.repeats):
            for name in ["direct"] + list(targets):
                proc = None
                if name == "direct":
                    port, pid = h2_port, None
                else:
                    argv, port = targets[name]
                    proc = start(argv, PROXY_CPU, log)
                    wait_port(port, proc)
                    pid = proc.pid
                    # taskset execs the target: the pid is the proxy's own
                origin_port = h2_port if name.endswith("h2") or name == "direct" else h1_port
                load = h2load(port, origin_port, a.requests, a.clients, a.streams)
                # warm-up, then the measured run
                subprocess.run(h2load(port, origin_port, min(a.requests, 10000), a.clients, a.streams),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
                # --syscalls counts the target's own process: not nghttpx, which works in children.
                counter, calls = None, {}
                if a.syscalls and pid and not name.startswith("nghttpx"):
                    perf_out = os.path.join(work, "perf-%s-%d.csv" % (name.replace("/", "-"), rep))
                    counter = kernel_ab.count_syscalls(pid, perf_out)
                try:
                    before = cpu_seconds(pid) if pid else 0.0
                    split_before = kernel_ab.cpu_split(pid) if counter else None
                    t0 = time.monotonic()
                    out = subprocess.run(load, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         timeout=600).stdout
                    elapsed = time.monotonic() - t0
                    cpu = (cpu_seconds(pid) - before) if pid else 0.0
                    split_after = kernel_ab.cpu_split(pid) if counter else None
                    if counter:
                        calls = kernel_ab.syscalls_per(counter, perf_out, 1)  # before the target's shutdown
                finally:
                    if counter and counter.poll() is None:
                        counter.send_signal(signal.SIGINT)
                        counter.wait()
                    if proc:
                        stop(proc)
                m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
                ok = int(m.group(3)) if m else 0
                rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
                status = re.search(r"status codes: (\d+) 2xx", out)
                cell = {"ok": ok, "rps": float(rps.group(1)) if rps else 0.0, "elapsed": elapsed,
                        "cpu_us": cpu / ok * 1e6 if ok else float("nan"), "2xx": int(status.group(1)) if status else 0}
                if counter:
                    cell["user_us"] = (split_after[0] - split_before[0]) / max(ok, 1) * 1e6
                    cell["sys_us"] = (split_after[1] - split_before[1]) / max(ok, 1) * 1e6
                    cell.update({kind: n / max(ok, 1) for kind, n in calls.items()})
                if ok < a.requests or cell["2xx"] < a.requests:
                    print("%s: only %d of %d succeeded (2xx %d)\n%s" % (name, ok, a.requests, cell["2xx"], out[-800:]),
                          file=sys.stderr)
                results.setdefault(name, []).append(cell)
                print("repeat %d %-15s %8.0f req/s  %6.2f us CPU/request" % (rep + 1, name, cell["rps"], cell["cpu_us"]),
                      flush=True)

        def med(name, key):
            return statistics.median(c[key] for c in results[name])

        print("\n| target | req/s | CPU µs/request | CPU vs HAProxy (same back end) | req/s vs HAProxy |")
        print("|---|---|---|---|---|")
        for name in results:
            rps, cpu = med(name, "rps"), med(name, "cpu_us")
            ref = "haproxy/" + name.split("/")[-1] if "/" in name else None
            if ref and ref in results and name != ref:
                print("| %s | %.0f | %.2f | %.2fx | %.2fx |" % (name, rps, cpu, cpu / med(ref, "cpu_us"),
                                                               rps / med(ref, "rps")))
            else:
                print("| %s | %.0f | %s | | |" % (name, rps, "%.2f" % cpu if name != "direct" else "-"))
        if a.syscalls:
            columns = ["user_us", "sys_us", "all"] + kernel_ab.SYSCALLS
            print("\nPer request, the target's own process (medians):\n")
            print("| target | user µs | system µs | system calls | " + " | ".join(kernel_ab.SYSCALLS) + " |")
            print("|---|" + "---:|" * len(columns))
            for name in results:
                if "user_us" in results[name][0]:
                    print("| %s | " % name + " | ".join("%.2f" % med(name, c) if c in results[name][0] else "-"
                                                        for c in columns) + " |")
        if "politeproxy/h1" in results and "politeproxy/h2" in results:
            print("\npoliteproxy h2 origin session vs HTTP/1.1 pooling, CPU per request: %.2fx"
                  % (med("politeproxy/h2", "cpu_us") / med("politeproxy/h1", "cpu_us")))
    finally:
        for p in procs:
            stop(p)
        log.close()


if __name__ == "__main__":
    main()
