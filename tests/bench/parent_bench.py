#!/usr/bin/python3
"""Parent proxies (issue 26): politeproxy's cost of carrying requests through a parent
proxy, against going to the origin direct, side by side in one run.

    /usr/bin/python3 tests/bench/parent_bench.py                       # 3 repeats x 10 s, ~3 min
    /usr/bin/python3 tests/bench/parent_bench.py --seconds 3 --repeats 1   # smoke run, ~40 s
    /usr/bin/python3 tests/bench/parent_bench.py --callgrind               # instructions, ~1.5 min

A  plain HTTP, 1 KiB, 64 keep-alive connections (wrk, lua/passthrough.lua, absolute form):
     nginx           politeproxy -> nginx (direct)
     haproxy-parent  politeproxy -> HAProxy (the parent: absolute-form requests in, the
                     origin as its one backend server) -> nginx
     haproxy-origin  politeproxy -> HAProxy as the origin (origin-form) -> nginx: the same
                     HAProxy work on core 0 without the parent path, so the ratio haproxy-parent /
                     haproxy-origin is politeproxy's own cost of the parent at the same load
B  intercepted HTTPS (tls.mode intercept), 1 KiB, 64 keep-alive client connections
   (build/tls_load: CONNECT, TLS, keep-alive GETs):
     nginx-tls       politeproxy -> nginx over TLS (direct)
     squid-parent    politeproxy -> CONNECT through Squid 5.7 (no bump) -> nginx over TLS

politeproxy: workers 1, limits wide open (every request still takes a slot and a token),
the parent with max_connections 1024, a route per part (SPEC.md parents/routes). CPU per
request = utime+stime from /proc/PID/stat over the measured window / requests the load
generator counted; the parent's CPU apart. Cores: nginx and wrk/tls_load on core 0,
politeproxy on core 1, the parent beside it (--parent-core, default 1: README.md, "Parent
proxies", says why). Runs interleaved, rotated per repeat; medians. --callgrind instead
counts each target's user-space instructions per request. Every process started by PID, stopped by PID, loopback only.
Writes /tmp/politeproxy-parent-bench-DATE.md (and .json); exit 1 on any failed run.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_plan as plan  # noqa: E402
from bench_http import LISTEN_RE, free_port, metric_sum  # noqa: E402
from bench_plan import REPO, TLS_ORIGIN_NAME, cost_config, render  # noqa: E402
from bench_procs import CLK_TCK, Interrupted, children_of, log, proc_cpu_seconds, wait_log_line, wait_port  # noqa: E402
from bench_report import busy_processes, fmt, machine_info, median  # noqa: E402
from bench_runner import Bench  # noqa: E402
from kernel_ab import SYSCALLS, context_switches, perf_usable  # noqa: E402

PLAIN = ["nginx", "haproxy-parent", "haproxy-origin"]
TLS = ["nginx-tls", "squid-parent"]
LABELS = {
    "nginx": "politeproxy -> nginx (direct)",
    "haproxy-parent": "politeproxy -> HAProxy parent -> nginx",
    "haproxy-origin": "politeproxy -> HAProxy as origin -> nginx (control)",
    "nginx-tls": "politeproxy intercept -> nginx TLS (direct)",
    "squid-parent": "politeproxy intercept -> Squid parent (CONNECT) -> nginx TLS",
}
PARENT = "fast"  # the parent's name in politeproxy's config


def parents_yaml(port, match):
    return ("parents:\n  %s:\n    url: http://127.0.0.1:%d\n    max_connections: 1024\n"
            "routes:\n  - match: [\"%s\"]\n    via: [%s]\n" % (PARENT, port, match, PARENT))


def user_sys(pid):
    """(utime, stime) of pid, all threads, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_of(pids):
    total = 0.0
    for pid in pids:
        try:
            total += proc_cpu_seconds(pid)
        except OSError:
            pass
    return total


class ParentBench(Bench):
    """Bench (its nginx, TLS files, politeproxy start-up, wrk and tls_load runs) with the
    two parents and the targets of this benchmark."""

    def __init__(self, args, workdir):
        super().__init__(args, workdir)
        self.results.update({"plain": {}, "tls": {}})
        self.haproxy = self.squid = None

    def start_haproxy(self):
        port = free_port()
        cfg = self.write("haproxy-parent.cfg", render("haproxy.cfg.in", port=port, origin_port=self.nginx_port,
                                                      maxconn=4000))
        self.haproxy = self.procs.start("haproxy-parent", ["haproxy", "-db", "-f", cfg], self.a.parent_core)
        wait_port(port, self.haproxy)
        self.haproxy.port = port

    def start_squid(self):
        port = free_port()
        sdir = os.path.join(self.dir, "squid-parent")
        os.makedirs(sdir)
        os.chmod(sdir, 0o777)  # squid started as root works as its own user (proxy)
        hosts = self.write("squid-parent-hosts", "127.0.0.1 %s\n" % TLS_ORIGIN_NAME)
        cfg = self.write("squid-parent.conf", render("squid-parent.conf.in", port=port, dir=sdir, hosts_file=hosts))
        self.squid = self.procs.start("squid-parent", ["/usr/sbin/squid", "-N", "-f", cfg], self.a.parent_core)
        wait_port(port, self.squid)
        self.squid.port = port

    def target_yaml(self, name):
        """politeproxy's config for target `name`."""
        if name in PLAIN:
            yaml_text = cost_config()
            return yaml_text + (parents_yaml(self.haproxy.port, "127.0.0.0/8") if name == "haproxy-parent" else "")
        t = self.tls
        yaml_text = render("politeproxy-intercept.yaml.in", origin_port=self.nginx_tls_port,
                           ca_cert=t["politeproxy_ca"], ca_key=t["politeproxy_ca_key"], origin_ca=t["origin_ca"])
        return yaml_text + (parents_yaml(self.squid.port, "*.bench.test") if name == "squid-parent" else "")

    def start_target(self, name, wrapper=()):
        if not wrapper:
            proc = self.start_politeproxy("pp-" + name, self.target_yaml(name))
        else:  # under valgrind: started as start_politeproxy does, with a longer wait
            cfg = self.write("pp-%s.yaml" % name, self.target_yaml(name))
            proc = self.procs.start("pp-" + name, list(wrapper) + [self.a.binary, "--config", cfg], plan.PROXY_CPU)
            m = wait_log_line(proc, LISTEN_RE, timeout=60)
            proc.port, proc.admin = int(m.group(2)), int(m.group(4))
        proc.cafile = self.tls["politeproxy_ca"] if name in TLS else None
        return proc

    def load(self, name, proc, seconds, conns):
        """The load generator's run against target `name` (its BENCH_JSON dict)."""
        if name in TLS:
            authority = "%s:%d" % (TLS_ORIGIN_NAME, self.nginx_tls_port)
            return self.run_load([self.a.tls_load, "--sni", TLS_ORIGIN_NAME, "--host", authority, "--path", "/1k",
                                  "--expect-length", "1024", "--connections", str(conns), "--seconds", str(seconds),
                                  "--per-connection", "0", "--rate", "0", "--warmup", "1" if seconds >= 3 else "0",
                                  "--target", "127.0.0.1:%d" % proc.port, "--connect", authority,
                                  "--cafile", proc.cafile], seconds, name="tls_load")
        origin_port = self.haproxy.port if name == "haproxy-origin" else self.nginx_port
        return self.run_wrk("http://127.0.0.1:%d/" % proc.port, conns, seconds, "passthrough.lua",
                            ["proxy", "http://127.0.0.1:%d/1k" % origin_port, 1024])

    def parent_counters(self, proc):
        """(requests the parent carried, connections made to it) from politeproxy's /metrics."""
        carried = connects = 0.0
        for n, labels, v in self.metrics(proc):
            if labels.get("parent") != PARENT:
                continue
            if n == "politeproxy_parent_requests_total":
                carried += v
            elif n == "politeproxy_parent_connect_seconds_count":
                connects += v
        return carried, connects

    def perf_start(self, proc):
        """perf stat counting politeproxy's system calls (--syscalls), by PID."""
        out = os.path.join(self.dir, "perf-%d.csv" % proc.pid)
        events = ",".join(["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + c for c in SYSCALLS])
        perf = self.procs.start("perf", ["perf", "stat", "-x,", "-o", out, "-e", events, "-p", str(proc.pid)],
                                plan.LOAD_CPU)
        time.sleep(0.3)  # attached (the proxy is idle meanwhile)
        perf.out = out
        return perf

    def perf_stop(self, perf):
        perf.popen.send_signal(signal.SIGINT)  # perf stat writes its counts and exits
        try:
            perf.popen.wait(10)
        finally:
            self.procs.stop(perf)
        counts = {}
        with open(perf.out) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[0].isdigit():
                    counts[parts[2].split("sys_enter_")[-1].replace("raw_syscalls:sys_enter", "all")] = int(parts[0])
        return counts

    def measure(self, name, proc, seconds):
        """One run of `name`: the load generator's dict plus politeproxy's CPU per request
        (user and system), the parent's, and the parent's and origin's new connections."""
        if not proc.alive():
            return {"error": "%s is not running (exit %s)" % (name, proc.popen.returncode)}
        parent = {"haproxy-parent": self.haproxy, "haproxy-origin": self.haproxy, "squid-parent": self.squid}.get(name)
        parent_pids = [parent.pid] + children_of(parent.pid) if parent else []
        counters0 = self.parent_counters(proc)
        accepts0 = self.nginx_accepts()
        perf = self.perf_start(proc) if self.a.syscalls else None
        (u0, s0), pcpu0, cs0 = user_sys(proc.pid), cpu_of(parent_pids), context_switches(proc.pid)
        res = self.load(name, proc, seconds, self.a.connections)
        times, pcpu1 = user_sys(proc.pid) if proc.alive() else None, cpu_of(parent_pids)
        cs1 = context_switches(proc.pid) if times else 0
        syscalls = self.perf_stop(perf) if perf else {}
        if times is None:
            res["error"] = "%s died during the run:\n%s" % (name, proc.log_tail())
            return res
        if parent and not parent.alive():
            res["error"] = "%s died during the run:\n%s" % (parent.name, parent.log_tail())
            return res
        q = res.get("requests")
        if not q:
            res.setdefault("error", "no requests answered")
            return res
        time.sleep(0.1)  # a request is counted when its exchange ends, just after its last byte
        counters1 = self.parent_counters(proc)
        res["user_us_per_req"], res["sys_us_per_req"] = (times[0] - u0) * 1e6 / q, (times[1] - s0) * 1e6 / q
        res["cpu_us_per_req"] = res["user_us_per_req"] + res["sys_us_per_req"]
        res["switches_per_req"] = (cs1 - cs0) / q
        res.update({"syscalls_%s_per_req" % k: v / q for k, v in syscalls.items()})
        if parent:
            res["parent_cpu_us_per_req"] = (pcpu1 - pcpu0) * 1e6 / q
        res["parent_carried"] = counters1[0] - counters0[0]
        res["parent_connects_per_1k"] = (counters1[1] - counters0[1]) * 1000 / q
        res["origin_conns_per_1k"] = (self.nginx_accepts() - accepts0 - 1) * 1000 / q  # minus the status request
        via_parent = name in ("haproxy-parent", "squid-parent")
        # every request counted by the load generator went through the parent, or none did
        if via_parent and res["parent_carried"] < q or not via_parent and res["parent_carried"]:
            res["error"] = "%d of %d requests went through the parent" % (res["parent_carried"], q)
        return res

    def part(self, key, names):
        a = self.a

        def cell(name, proc, _c):
            return (name, key, self.measure(name, proc, a.seconds))

        log("%s: a warm-up of %d s each, not counted" % (key, a.warmup))
        self.run_targets(key, names, self.start_target, lambda name, proc: self.measure(name, proc, a.warmup),
                         [None], cell)

    def instructions(self, name):
        """User-space instructions per request of target `name` under callgrind (--callgrind):
        warmed up, then counted over --seconds of load with --callgrind-connections."""
        out = os.path.join(self.dir, "pp-%s.callgrind" % name)
        proc = self.start_target(name, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                        "--callgrind-out-file=" + out])
        try:
            self.load(name, proc, 3, self.a.callgrind_connections)
            before = metric_sum(self.metrics(proc), "politeproxy_requests_total")
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
            res = self.load(name, proc, self.a.seconds, self.a.callgrind_connections)
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
            time.sleep(0.2)
            counted = metric_sum(self.metrics(proc), "politeproxy_requests_total") - before
        finally:
            self.procs.stop(proc, grace=30)
        if res.get("error"):
            return res
        with open(out) as f:
            total = int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))
        log("%s: %d instructions over %d requests" % (name, total, counted))
        return {"instructions": total, "requests": counted, "per_request": total / max(counted, 1)}

    def run(self):
        self.start_nginx()
        if "plain" in self.a.parts:
            self.start_haproxy()
        if "tls" in self.a.parts:
            self.start_squid()
        for key, names in (("plain", PLAIN), ("tls", TLS)):
            if key not in self.a.parts:
                continue
            if self.a.callgrind:
                for name in names:
                    r = self.instructions(name)
                    self.results.setdefault("instructions", {})[name] = r
                    if r.get("error"):
                        self.fail("callgrind %s" % name, r["error"])
            else:
                self.part(key, names)


# ---- the report ------------------------------------------------------------------------------
def agg(runs):
    good = [r for r in runs or [] if not r.get("error")]
    m = lambda k: median([r.get(k) for r in good])  # noqa: E731
    return {"rps": m("rps"), "p50": m("p50_us") and m("p50_us") / 1000, "p99": m("p99_us") and m("p99_us") / 1000,
            "cpu": m("cpu_us_per_req"), "user": m("user_us_per_req"), "sys": m("sys_us_per_req"),
            "pcpu": m("parent_cpu_us_per_req"), "pconn": m("parent_connects_per_1k"), "oconn": m("origin_conns_per_1k"),
            "failed": len(runs or []) - len(good)}


def paired(R, part, num, den, key="cpu_us_per_req"):
    """Per-repeat ratios num/den (the two ran next to each other in each repeat)."""
    a, b = R[part].get(num, []), R[part].get(den, [])
    return [x[key] / y[key] for x, y in zip(a, b) if not x.get("error") and not y.get("error")]


def rx(x, y):
    return "%.2fx" % (x / y) if x is not None and y else "–"


def summarize(bench, info, a, elapsed):
    R, L = bench.results, []
    L += ["## Parent proxies (tests/bench/parent_bench.py)", "",
          "- date: %s; run time %.1f min; command: `%s`" % (info["date"], elapsed / 60, info["command"]),
          "- machine: %d cores, %s; load average at start %s%s" % (
              info["nproc"], info["cpu"], " ".join(info["loadavg_start"]),
              ("; **busy: %s**" % ", ".join(info["busy"])) if info["busy"] else ""),
          "- politeproxy %s (commit %s); %s" % (info["politeproxy"], info["commit"], "; ".join(
              v for k, v in info["versions"].items() if k in ("nginx", "haproxy", "squid", "wrk"))),
          "- method: nginx and the load generator on core %d, politeproxy (workers 1) on core %d, the parent "
          "on core %d; %d connections, 1 KiB; %d repeat(s) x %d s, interleaved, medians"
          % (plan.LOAD_CPU, plan.PROXY_CPU, a.parent_core, a.connections, a.repeats, a.seconds), ""]
    goal = None
    for part, names, title, pname in (("plain", PLAIN, "A. Plain HTTP", "HAProxy"),
                                      ("tls", TLS, "B. Intercepted HTTPS", "Squid")):
        if not R.get(part):
            continue
        ref = agg(R[part].get(names[0]))
        L += ["### %s through a parent" % title, "",
              "| target | req/s | ×direct | p50 ms | p99 ms | politeproxy CPU µs/req (user + sys) | ×direct "
              "| %s CPU µs/req | new parent conns /1k req | nginx accepts /1k req |" % pname,
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name in names:
            g = agg(R[part].get(name))
            label = LABELS[name] + (" (%d run(s) failed)" % g["failed"] if g["failed"] else "")
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, fmt(g["rps"], 0), rx(g["rps"], ref["rps"]), fmt(g["p50"], 2), fmt(g["p99"], 2),
                "%s (%s + %s)" % (fmt(g["cpu"], 1), fmt(g["user"], 1), fmt(g["sys"], 1)), rx(g["cpu"], ref["cpu"]),
                fmt(g["pcpu"], 1) if name != names[0] else "–",
                fmt(g["pconn"], 2) if name in ("haproxy-parent", "squid-parent") else "–", fmt(g["oconn"], 2)))
        L.append("")
        if a.syscalls:
            L += ["| politeproxy, per request (perf stat) | system calls | recvfrom | sendto | epoll_wait "
                  "| context switches |", "|---|---:|---:|---:|---:|---:|"]
            for name in names:
                rs = [r for r in R[part].get(name, []) if not r.get("error")]
                cols = ["syscalls_%s_per_req" % k for k in ("all", "recvfrom", "sendto", "epoll_wait")]
                L.append("| %s | %s | %s |" % (LABELS[name], " | ".join(fmt(median([r.get(c) for r in rs]), 2)
                                                                       for c in cols),
                                               fmt(median([r.get("switches_per_req") for r in rs]), 3)))
            L.append("")
        par = "haproxy-parent" if part == "plain" else "squid-parent"
        per = paired(R, part, par, names[0])
        if per:
            L.append("politeproxy's CPU per request through the parent / direct, per repeat: %s (median %.2fx)"
                     % (", ".join("%.2f" % x for x in per), median(per)) + ("" if part == "plain" else "."))
        if part == "plain":
            ctl = paired(R, part, "haproxy-parent", "haproxy-origin")
            if per and ctl:
                L[-1] += ("; through the parent / through HAProxy as the origin (the same HAProxy work on core %d), "
                          "per repeat: %s (median %.2fx)." % (a.parent_core, ", ".join("%.2f" % x for x in ctl),
                                                              median(ctl)))
            g = agg(R[part].get("haproxy-parent"))
            if g["cpu"] and ref["cpu"]:
                goal = g["cpu"] / ref["cpu"]
        L.append("")
    ins = R.get("instructions")
    if ins:
        L += ["### User-space instructions per request (callgrind, %d connections, %d s)" % (
            a.callgrind_connections, a.seconds), "", "| target | requests | instructions / request | ×direct |",
            "|---|---:|---:|---:|"]
        for name, r in ins.items():
            ref = ins.get(PLAIN[0] if name in PLAIN else TLS[0], {})
            L.append("| %s | %s | %s | %s |" % (LABELS[name], "%d" % r["requests"] if "requests" in r else "–",
                                                fmt(r.get("per_request"), 0),
                                                rx(r.get("per_request"), ref.get("per_request"))))
        L.append("")
    if goal is not None:
        L += ["Goal (issue 26): politeproxy's CPU per request through a fast parent <= 1.1x direct: %.2fx, %s."
              % (goal, "met" if goal <= 1.1 else "**not met**"), ""]
    if bench.failures:
        L += ["### Failures", ""] + ["- " + f.replace("\n", " ")[:400] for f in bench.failures] + [""]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=10, help="seconds per measured run")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of every target (medians)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds of the one warm-up run of each target")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--parts", default="plain,tls", help="comma list of plain (A), tls (B)")
    ap.add_argument("--parent-core", type=int, default=1, help="core of HAProxy and Squid (default: politeproxy's)")
    ap.add_argument("--callgrind", action="store_true",
                    help="instead: user-space instructions per request of each target under callgrind")
    ap.add_argument("--callgrind-connections", type=int, default=16)
    ap.add_argument("--syscalls", action="store_true", help="count politeproxy's system calls with perf stat "
                    "(its tracepoints add to every target's CPU figures)")
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "politeproxy"))
    ap.add_argument("--tls-load", default=os.path.join(REPO, "build", "tls_load"))
    ap.add_argument("--out", default=None, help="report path (default /tmp/politeproxy-parent-bench-DATE.md)")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (configs, logs)")
    a = ap.parse_args()
    a.parts = [p.strip() for p in a.parts.split(",") if p.strip()]
    if not set(a.parts) <= {"plain", "tls"}:
        ap.error("--parts: plain, tls")
    for tool in ("wrk", "nginx", "haproxy", "/usr/sbin/squid", a.binary) + ((a.tls_load,) if "tls" in a.parts else ()):
        if not shutil.which(tool):
            sys.exit("%s not found (scripts/install-deps.sh --bench; build/ for politeproxy and tls_load)" % tool)
    if a.syscalls and not perf_usable():
        sys.exit("--syscalls: perf stat cannot count the syscalls tracepoints here")
    if (os.cpu_count() or 1) < 2:
        plan.LOAD_CPU = plan.PROXY_CPU = a.parent_core = 0
        log("warning: one core only: everything shares it")
    os.sched_setaffinity(0, {plan.LOAD_CPU})  # the orchestrator stays off politeproxy's core

    workdir = tempfile.mkdtemp(prefix="politeproxy-parent-bench-")
    os.chmod(workdir, 0o755)  # nginx workers and squid run as unprivileged users
    # A copy of the binary: a rebuild during the run must not change what is measured.
    binary = os.path.join(workdir, "politeproxy")
    shutil.copy2(a.binary, binary)
    info = machine_info()
    info["busy"] = busy_processes()
    info["command"] = " ".join(["/usr/bin/python3", os.path.relpath(os.path.abspath(sys.argv[0]), REPO)] + sys.argv[1:])
    info["politeproxy"] = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True).stdout.strip()
    info["commit"] = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h"], stdout=subprocess.PIPE,
                                    text=True).stdout.strip() + " (binary of %s)" % time.strftime(
        "%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(a.binary)))
    if info["busy"] or float(info["loadavg_start"][0]) > 0.5:
        log("warning: the machine is not quiet (load %s; %s)" % (info["loadavg_start"][0], ", ".join(info["busy"])))
    args = argparse.Namespace(binary=binary, baseline=None, tls_load=a.tls_load, polite_delay=0.1,
                              repeats=a.repeats,
                              scenarios=["passthrough"] + (["intercept"] if "tls" in a.parts else []),
                              seconds=a.seconds, warmup=a.warmup, connections=a.connections, parts=a.parts,
                              parent_core=a.parent_core, callgrind=a.callgrind,
                              callgrind_connections=a.callgrind_connections, syscalls=a.syscalls)
    bench = ParentBench(args, workdir)

    def on_signal(signo, _frame):
        raise Interrupted("signal %d" % signo)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    t0 = time.monotonic()
    bench.guarded(bench.run)
    text = summarize(bench, info, a, time.monotonic() - t0)
    out = a.out or "/tmp/politeproxy-parent-bench-%s.md" % datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    with open(out, "w") as f:
        f.write(text + "\n")
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"info": info, "args": vars(a), "results": bench.results, "failures": bench.failures}, f,
                  indent=1, default=str)
    print(text)
    print("\nreport: %s (raw figures: %s.json)" % (out, os.path.splitext(out)[0]))
    if bench.failures or a.keep_tmp:
        print("logs and configs kept in %s" % workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if bench.failures else 0)


if __name__ == "__main__":
    main()
