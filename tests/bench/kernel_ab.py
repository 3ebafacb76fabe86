#!/usr/bin/python3
"""Where the kernel's share of a forwarded request goes, for politeproxy binaries and
HAProxy side by side: CPU per request split into user and system time, system calls per
request by kind, and context switches (sleeps in epoll_wait) per request. The other half
of instructions_ab.py: on this machine a system call costs about a microsecond, so the
kernel's share is most of the CPU per request.

    /usr/bin/python3 tests/bench/kernel_ab.py BINARY [BINARY...] [--repeats 6] [--seconds 5]

Same set-up as the pass-through benchmark (nginx serving 1 KiB on core 0 with wrk, the
proxy alone on core 1, 64 connections), runs interleaved and rotated per repeat, medians
printed at the end. System calls are counted with `perf stat` on the syscalls
tracepoints (tracefs is mounted when it is not); without perf the columns say "-".
Needs the bench packages (scripts/install-deps.sh --bench)."""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as B  # noqa: E402

SYSCALLS = ["recvfrom", "recvmsg", "sendto", "sendmsg", "epoll_wait", "epoll_ctl", "clock_gettime"]


def cpu_split(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / B.CLK_TCK, int(fields[12]) / B.CLK_TCK


def context_switches(pid):
    n = 0
    for status in glob.glob("/proc/%d/task/*/status" % pid):
        with open(status) as f:
            n += sum(int(line.split()[1]) for line in f if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")))
    return n


def perf_usable():
    if not os.path.isdir("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], stderr=subprocess.DEVNULL)
    try:
        r = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=20)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def count_syscalls(pid, out):
    """perf stat counting `pid`'s system calls (all, and each of SYSCALLS) into the file `out`."""
    events = ",".join(["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + s for s in SYSCALLS])
    perf = subprocess.Popen(["perf", "stat", "-x,", "-o", out, "-e", events, "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return perf


def syscalls_per(perf, out, n):
    """Stops count_syscalls' perf; its counts ("all", "recvfrom", ...) each over n."""
    perf.send_signal(2)
    perf.wait()
    row = {}
    with open(out) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) > 2 and parts[0].replace(".", "").isdigit():
                # counted over the 0.3 s before the load too, when the proxy is idle
                row[parts[2].split("sys_enter_")[-1].replace("raw_syscalls:sys_enter", "all")] = int(parts[0]) / n
    return row


def one_run(bench, proc, origin, conns, seconds, use_perf):
    out = os.path.join(bench.dir, "perf.csv")
    perf = count_syscalls(proc.pid, out) if use_perf else None
    u0, s0 = cpu_split(proc.pid)
    cs0 = context_switches(proc.pid)
    r = bench.run_wrk("http://127.0.0.1:%d/" % proc.port, conns, seconds, "passthrough.lua", ["proxy", origin, 1024])
    u1, s1 = cpu_split(proc.pid)
    cs1 = context_switches(proc.pid)
    if r.get("error"):
        raise RuntimeError(r["error"])
    q = r["requests"]
    row = {"user": (u1 - u0) * 1e6 / q, "sys": (s1 - s0) * 1e6 / q, "cs": (cs1 - cs0) / q, "rps": r["rps"]}
    if perf:
        row.update(syscalls_per(perf, out, q))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--no-haproxy", action="store_true")
    a = ap.parse_args()
    a.binaries = [os.path.abspath(b) for b in a.binaries]
    os.sched_setaffinity(0, {B.LOAD_CPU})
    use_perf = perf_usable()
    args = argparse.Namespace(polite_delay=0.1, scenarios=["passthrough"], binary=a.binaries[0], baseline=None)
    workdir = tempfile.mkdtemp(prefix="politeproxy-kernel-ab-")
    os.chmod(workdir, 0o755)
    bench = B.Bench(args, workdir)
    rows = {}
    try:
        bench.start_nginx()
        procs = {}
        for i, binary in enumerate(a.binaries):
            name = "pp%d" % (i + 1)
            procs[name] = bench.start_politeproxy(name, B.cost_config(), binary)
            B.log("%s = %s" % (name, binary))
        if not a.no_haproxy:
            procs["haproxy"] = bench.start_proxy("haproxy")
        origin = "http://127.0.0.1:%d/1k" % bench.nginx_port
        names = list(procs)
        for name in names:  # warm-up, not counted
            bench.run_wrk("http://127.0.0.1:%d/" % procs[name].port, a.connections, 1, "passthrough.lua",
                          ["proxy", origin, 1024])
        for rep in range(a.repeats):
            k = rep % len(names)
            for name in names[k:] + names[:k]:
                row = one_run(bench, procs[name], origin, a.connections, a.seconds, use_perf)
                rows.setdefault(name, []).append(row)
                B.log("rep %d %-8s user %5.1f sys %5.1f us/req  %6.0f req/s  %.3f switches/req  %s syscalls/req" % (
                    rep + 1, name, row["user"], row["sys"], row["rps"], row["cs"], B.fmt(row.get("all"), 2)))
    finally:
        bench.procs.stop_all()
    cols = ["user", "sys", "cpu", "rps", "cs", "all"] + SYSCALLS
    print("| target | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, rs in rows.items():
        for r in rs:
            r["cpu"] = r["user"] + r["sys"]
        med = lambda c: B.median([r[c] for r in rs if c in r]) if any(c in r for r in rs) else None
        digits = {"rps": 0, "cs": 3}
        print("| %s | %s |" % (name, " | ".join(B.fmt(med(c), digits.get(c, 2 if c not in ("user", "sys", "cpu") else 1))
                                                 for c in cols)))
    print("\nmedians of %d repeats x %d s, %d connections, 1 KiB; user/sys/cpu in µs per request, cs = context "
          "switches per request, syscall columns per request" % (a.repeats, a.seconds, a.connections))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
