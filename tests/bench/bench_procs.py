"""The processes of a benchmark: Procs starts each on its core, in a session of its own
that dies with the benchmark (PR_SET_PDEATHSIG), records it by PID and stops exactly
those PIDs; wait_port and wait_log_line wait for one to come up. What /proc says about a
process: CPU seconds, RSS (and resetting its peak), its children. Also the
orchestrator's log (seconds since start, to stderr) and Interrupted (a signal ends the
run)."""
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_T0 = time.monotonic()


class Interrupted(Exception):
    pass


def log(*a):
    print("[%6.1fs]" % (time.monotonic() - _T0), *a, file=sys.stderr, flush=True)


def _child_setup(cpu):
    def f():
        os.sched_setaffinity(0, {cpu})
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the benchmark
    return f


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        data = f.read()
    fields = data[data.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime, all threads


def proc_status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss(pid):
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


class Proc:
    def __init__(self, name, popen, logfile, extra_pids=()):
        self.name = name
        self.popen = popen
        self.pid = popen.pid
        self.logfile = logfile
        self.extra_pids = list(extra_pids)  # e.g. nginx workers, stopped by PID too

    def alive(self):
        return self.popen.poll() is None

    def log_tail(self, n=15):
        try:
            with open(self.logfile, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class Procs:
    """Every process the benchmark starts, by PID; stop_all() ends exactly those."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []

    def start(self, name, argv, cpu, stdin=subprocess.DEVNULL):
        logfile = os.path.join(self.workdir, "%s.log" % name)
        out = open(logfile, "ab")
        p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                             preexec_fn=_child_setup(cpu), start_new_session=True)
        out.close()
        proc = Proc(name, p, logfile)
        self.procs.append(proc)
        log("started %s pid %d on core %d" % (name, p.pid, cpu))
        return proc

    def stop(self, proc, grace=5.0):
        if proc not in self.procs:
            return
        self.procs.remove(proc)
        if proc.alive():
            try:
                proc.popen.send_signal(signal.SIGTERM)
                proc.popen.wait(grace)
            except subprocess.TimeoutExpired:
                log("%s pid %d ignored SIGTERM; SIGKILL" % (proc.name, proc.pid))
                proc.popen.kill()
                proc.popen.wait()
        for pid in proc.extra_pids:  # children that outlived their parent (should not happen)
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if proc.name.encode() in f.read():
                        os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if proc.popen.stdin:
            try:
                proc.popen.stdin.close()
            except OSError:
                pass

    def stop_all(self):
        for proc in reversed(list(self.procs)):
            try:
                self.stop(proc)
            except Exception as e:  # keep stopping the others
                log("stopping %s: %r" % (proc.name, e))


def wrk_threads_done():
    """An `until` for Bench.run_wrk with hosts.lua "once": true once wrk's worker threads,
    seen running, have exited (each had its share answered; its main thread would sleep
    out -d). Watching the thread count instead of scraping /metrics keeps the proxy's
    memory free of scrapes."""
    seen = {"threads": False}

    def done(wrk_pid):
        try:
            tasks = len(os.listdir("/proc/%d/task" % wrk_pid))
        except OSError:
            return False
        seen["threads"] = seen["threads"] or tasks > 1
        return seen["threads"] and tasks <= 1

    return done


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    data = f.read()
                if int(data[data.rfind(")") + 2:].split()[1]) == pid:
                    kids.append(int(d))
            except OSError:
                pass
    return kids


def wait_port(port, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError("%s exited (%s) during start-up:\n%s" % (proc.name, proc.popen.returncode, proc.log_tail()))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not listen on %d in %.0fs:\n%s" % (proc.name, port, timeout, proc.log_tail()))


def wait_log_line(proc, regex, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(proc.logfile, errors="replace") as f:
                m = regex.search(f.read())
            if m:
                return m
        except OSError:
            pass
        if not proc.alive():
            raise RuntimeError("%s exited (%s) during start-up:\n%s" % (proc.name, proc.popen.returncode, proc.log_tail()))
        time.sleep(0.05)
    raise RuntimeError("%s printed no start-up line in %.0fs:\n%s" % (proc.name, timeout, proc.log_tail()))
