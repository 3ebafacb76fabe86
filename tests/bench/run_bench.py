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
  gate         build/gate_bench: ns per acquire+release at 1, 1k, 100k hosts

The summary (markdown) is printed at the end and written to /tmp/politeproxy-bench-*.md,
with the raw figures in a .json beside it. Exit status 0 when every run completed with
every response checked; 1 otherwise (the table says which run failed).
Standard library + python3-yaml only; run as root (it writes /proc/PID/clear_refs and
raises RLIMIT_NOFILE).
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
LUA = os.path.join(HERE, "lua")
CONF = os.path.join(HERE, "conf")
CLK_TCK = os.sysconf("SC_CLK_TCK")
LISTEN_RE = re.compile(r"politeproxy: listening proxy=([0-9.]+):(\d+) admin=([0-9.]+):(\d+)")
METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
PROXIES = ["direct", "haproxy", "squid", "tinyproxy", "mitmproxy", "politeproxy"]
RUNNABLE = PROXIES + ["baseline"]  # baseline: only with --baseline
PASSTHROUGH_PROXIES = ["direct", "haproxy", "squid", "tinyproxy", "politeproxy", "baseline"]
# In the intercept scenario: direct = TLS straight to nginx, haproxy = HAProxy terminating
# TLS as a reverse proxy, squid = Squid ssl_bump, mitmproxy and politeproxy intercepting.
INTERCEPT_PROXIES = ["direct", "haproxy", "squid", "mitmproxy", "politeproxy", "baseline"]
TLS_ORIGIN_NAME = "origin.bench.test"  # every target resolves it to 127.0.0.1 (Squid's certificates name an IP
# literal in a DNS SAN, which no client accepts: a name keeps the comparison fair, and SNI in it)
# (requests per client connection (0: keep-alive), paced: at --intercept-rate req/s rather than as fast as answered)
INTERCEPT_CELLS = [(0, False), (10, False), (0, True), (10, True)]


def intercept_cell(per_connection, paced, rate):
    return "%s%s" % ("keep-alive" if per_connection == 0 else "new TLS conn / %d req" % per_connection,
                     ", %d req/s" % rate if paced else "")
SCENARIOS = ["gate", "passthrough", "intercept", "politeness", "memory"]
BODIES = [("1k", 1024), ("100k", 102400)]
CONNS = [1, 64, 256]
HEADLINE = ("1k", 64)  # the cell the goals are about: it runs for --duration

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via $http_proxy
_T0 = time.monotonic()
LOAD_CPU, PROXY_CPU = 0, 1


class Interrupted(Exception):
    pass


def log(*a):
    print("[%6.1fs]" % (time.monotonic() - _T0), *a, file=sys.stderr, flush=True)


def _child_setup(cpu):
    def f():
        os.sched_setaffinity(0, {cpu})
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the benchmark
    return f


def free_port(_taken=set()):
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _taken:
            _taken.add(port)
            return port


def http_get(url, timeout=10.0):
    with _http.open(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def parse_metrics(text):
    """[(name, {label: value}, float)]"""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = METRIC_RE.match(line)
        if not m:
            continue
        labels = dict(LABEL_RE.findall(m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return out


def metric_sum(metrics, name):
    return sum(v for n, _, v in metrics if n == name)


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


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1, unit=""):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if abs(x) >= 100:
        return "%.0f%s" % (x, unit)
    return ("%." + str(digits) + "f%s") % (x, unit)


def ratio(x, ref):
    if x is None or ref in (None, 0):
        return "–"
    return "%.2f" % (x / ref)


def render(template, **values):
    with open(os.path.join(CONF, template)) as f:
        return string.Template(f.read()).substitute(**values)


# --------------------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args, workdir):
        self.a = args
        self.dir = workdir
        self.procs = Procs(workdir)
        self.failures = []
        self.results = {"passthrough": {}, "intercept": {}, "politeness": None, "memory": None, "parked": None, "gate": None}
        self.nginx = None
        self.nginx_port = None
        self.nginx_tls_port = None
        self.tls = None  # the intercept scenario's certificates (make_tls_files)
        self.echo_module = False

    # ---- helpers -----------------------------------------------------------------------
    def fail(self, what, why):
        msg = "%s: %s" % (what, why)
        self.failures.append(msg)
        log("FAILED " + msg)

    def write(self, name, text, mode=0o644):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def run_wrk(self, url, conns, seconds, script, script_args, threads=1, until=None, name="wrk"):
        """Runs wrk on the load core; returns the BENCH_JSON dict (+ 'rc', 'error')."""
        argv = ["wrk", "-t", str(threads), "-c", str(conns), "-d", "%ds" % max(1, int(round(seconds))),
                "--timeout", "10s", "-s", os.path.join(LUA, script), url, "--"] + [str(x) for x in script_args]
        return self.run_load(argv, seconds, until, name)

    def run_load(self, argv, seconds, until=None, name="wrk"):
        """Runs a load generator that ends with a BENCH_JSON line (wrk with lua/common.lua,
        build/tls_load) on the load core; returns that dict (+ 'rc', 'error')."""
        outfile = os.path.join(self.dir, "%s-last.out" % name)
        with open(outfile, "wb") as out:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 preexec_fn=_child_setup(LOAD_CPU), start_new_session=True)
        proc = Proc(name, p, outfile)
        self.procs.procs.append(proc)
        try:
            deadline = time.monotonic() + seconds + 60
            interrupted = False
            while p.poll() is None:
                if time.monotonic() > deadline:
                    p.kill()
                    break
                if until is not None and not interrupted and until(p.pid):
                    p.send_signal(signal.SIGINT)  # wrk stops its threads and reports (tls_load never gets here)
                    interrupted = True
                time.sleep(0.2 if until else 0.05)
            p.wait()
        finally:
            self.procs.stop(proc)
        with open(outfile, errors="replace") as f:
            text = f.read()
        res = {"rc": p.returncode}
        m = re.search(r"^BENCH_JSON (.*)$", text, re.M)
        if m:
            res.update(json.loads(m.group(1)))
            res["rps"] = res["requests"] / (res["duration_us"] / 1e6) if res["duration_us"] else 0.0
        if p.returncode != 0 or not m:
            why = "%s exit %s" % (name, p.returncode)
            if m and res.get("bad"):
                why += ", %d bad responses (first: %s)" % (res["bad"], res.get("first_bad"))
            elif m and res.get("ok") != res.get("requests"):
                why += ", %s checked of %s responses" % (res.get("ok"), res.get("requests"))
            elif not m:
                why += ": " + text.strip()[-300:]
            res["error"] = why
        return res

    def start_politeproxy(self, name, yaml_text, binary=None):
        cfg = self.write(name + ".yaml", yaml_text)
        proc = self.procs.start(name, [binary or self.a.binary, "--config", cfg], PROXY_CPU)
        m = wait_log_line(proc, LISTEN_RE)
        proc.port, proc.admin = int(m.group(2)), int(m.group(4))
        proc.config = cfg
        return proc

    def metrics(self, proc):
        return parse_metrics(http_get("http://127.0.0.1:%d/metrics" % proc.admin))

    # ---- origin ------------------------------------------------------------------------
    def start_nginx(self):
        www = os.path.join(self.dir, "www")
        os.makedirs(www)
        os.chmod(www, 0o755)
        for name, size in BODIES:
            with open(os.path.join(www, name), "wb") as f:
                f.write((b"0123456789abcdef" * (size // 16 + 1))[:size])
            os.chmod(os.path.join(www, name), 0o644)
        echo = "load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;"
        delays = ("        location = /slow { echo_sleep %s; echo \"ok\"; }\n"
                  "        location = /park { echo_sleep 600; echo \"ok\"; }" % self.a.polite_delay)
        port = free_port()
        tls_server = ""
        if "intercept" in self.a.scenarios:
            self.tls = self.make_tls_files()
            self.nginx_tls_port = free_port()
            tls_server = render("nginx-tls-server.in", port=self.nginx_tls_port, dir=self.dir,
                                cert=self.tls["origin_cert"], key=self.tls["origin_key"])
        conf = self.write("nginx-test.conf", render("nginx.conf.in", echo_module=echo, dir=self.dir, port=port,
                                                    delay_locations=delays, tls_server=tls_server))
        t = subprocess.run(["nginx", "-t", "-q", "-p", self.dir, "-e", os.path.join(self.dir, "nginx-error.log"),
                            "-c", conf], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.echo_module = t.returncode == 0
        if not self.echo_module:
            log("nginx echo module (libnginx-mod-http-echo) does not load: %s; /park is served by "
                "slow_origin.py instead" % t.stdout.strip()[-200:])
            echo, delays = "", ""
        conf = self.write("nginx.conf", render("nginx.conf.in", echo_module=echo, dir=self.dir, port=port,
                                               delay_locations=delays, tls_server=tls_server))
        self.nginx = self.procs.start("nginx", ["nginx", "-p", self.dir, "-e", os.path.join(self.dir, "nginx-error.log"),
                                                "-c", conf], LOAD_CPU)
        wait_port(port, self.nginx)
        self.nginx.extra_pids = children_of(self.nginx.pid)
        self.nginx_port = port
        body = http_get("http://127.0.0.1:%d/1k" % port)
        assert len(body) == 1024, "nginx serves /1k"

    def start_slow_origin(self, name="slow_origin"):
        proc = self.procs.start(name, [sys.executable, os.path.join(HERE, "slow_origin.py"), "--port", "0",
                                       "--delay", str(self.a.polite_delay)], LOAD_CPU)
        m = wait_log_line(proc, re.compile(r"slow_origin: listening (\d+)"))
        proc.port = int(m.group(1))
        return proc

    # ---- proxies -----------------------------------------------------------------------
    def start_proxy(self, name):
        port = free_port()
        if name == "haproxy":
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            maxconn = max(512, min(9000, (nofile - 200) // 2))  # haproxy refuses to start above its fd limit
            cfg = self.write("haproxy.cfg", render("haproxy.cfg.in", port=port, origin_port=self.nginx_port,
                                                   maxconn=maxconn))
            proc = self.procs.start(name, ["haproxy", "-db", "-f", cfg], PROXY_CPU)
        elif name == "squid":
            sdir = os.path.join(self.dir, "squid")
            os.makedirs(sdir, exist_ok=True)
            os.chmod(sdir, 0o777)  # squid started as root drops to its own user
            cfg = self.write("squid.conf", render("squid.conf.in", port=port, dir=sdir))
            proc = self.procs.start(name, ["squid", "-N", "-f", cfg], PROXY_CPU)
        elif name == "tinyproxy":
            cfg = self.write("tinyproxy.conf", render("tinyproxy.conf.in", port=port, dir=self.dir))
            proc = self.procs.start(name, ["tinyproxy", "-d", "-c", cfg], PROXY_CPU)
        elif name == "politeproxy":
            return self.start_politeproxy("politeproxy", render("politeproxy-passthrough.yaml.in"))
        elif name == "baseline":  # --baseline: another politeproxy binary, for an A/B
            return self.start_politeproxy("baseline", render("politeproxy-passthrough.yaml.in"), self.a.baseline)
        else:
            raise ValueError(name)
        wait_port(port, proc)
        proc.port = port
        return proc

    # ---- scenario 1: pass-through ----------------------------------------------------
    def passthrough_run(self, name, proc, body, size, conns, seconds):
        url = "http://127.0.0.1:%d/%s" % (self.nginx_port, body)
        if name == "direct":
            res = self.run_wrk("http://127.0.0.1:%d/" % self.nginx_port, conns, seconds, "passthrough.lua",
                               ["direct", url, size])
            return res
        if not proc.alive():
            return {"error": "%s is not running (exit %s)" % (name, proc.popen.returncode)}
        reset_peak_rss(proc.pid)
        cpu0 = proc_cpu_seconds(proc.pid)
        res = self.run_wrk("http://127.0.0.1:%d/" % proc.port, conns, seconds, "passthrough.lua", ["proxy", url, size])
        if not proc.alive():
            res["error"] = "%s died during the run:\n%s" % (name, proc.log_tail())
            return res
        cpu1 = proc_cpu_seconds(proc.pid)
        res["rss_peak_kb"] = proc_status_kb(proc.pid, "VmHWM")
        if res.get("requests"):
            res["cpu_us_per_req"] = (cpu1 - cpu0) * 1e6 / res["requests"]
        return res

    def run_targets(self, scenario, names, start, warm_up, cells, run_cell):
        """Starts every target but direct (start(name) -> Proc), warms each up once
        (warm_up(name, proc) -> result), then runs every cell on every target --repeats
        times, interleaved: within a repeat each cell runs the targets in turn, in an order
        rotated from cell to cell. run_cell(name, proc, cell) -> (key, label, result); the
        result is kept under results[scenario][key] and logged (or failed) with `label`."""
        procs = {}
        try:
            for name in names:
                if name != "direct":
                    try:
                        procs[name] = start(name)
                    except Exception as e:
                        self.fail("%s/%s" % (scenario, name), "does not start: %s" % e)
            names = [n for n in names if n == "direct" or n in procs]
            for name in names:
                r = warm_up(name, procs.get(name))
                if r.get("error"):
                    log("warm-up %s: %s" % (name, r["error"]))
            for rep in range(self.a.repeats):
                for ci, cell in enumerate(cells):
                    k = (rep + ci) % len(names)
                    for name in names[k:] + names[:k]:
                        key, label, r = run_cell(name, procs.get(name), cell)
                        self.results[scenario].setdefault(key, []).append(r)
                        if r.get("error"):
                            self.fail("%s %s %s (repeat %d)" % (scenario, label, name, rep + 1), r["error"])
                        else:
                            log("rep %d %-26s %-11s %8.0f req/s  p99 %7.2f ms  cpu %s us/req%s" % (
                                rep + 1, label, name, r["rps"], r["p99_us"] / 1000, fmt(r.get("cpu_us_per_req")),
                                "  %d origin conns" % r["origin_connections"] if "origin_connections" in r else ""))
        finally:
            for p in procs.values():
                self.procs.stop(p)

    def scenario_passthrough(self):
        a = self.a

        def cell(name, proc, c):
            body, size, conns = c
            seconds = a.duration if (body, conns) == HEADLINE else a.sweep_duration
            return ("%s/%d/%s" % (body, conns, name), "%s c%d" % (body, conns),
                    self.passthrough_run(name, proc, body, size, conns, seconds))

        log("pass-through: a warm-up of 1 s each, not counted")
        self.run_targets("passthrough", [p for p in PASSTHROUGH_PROXIES if p in a.proxies], self.start_proxy,
                         lambda name, proc: self.passthrough_run(name, proc, "1k", 1024, 64, 1),
                         [(b, s, c) for b, s in BODIES for c in CONNS], cell)

    # ---- scenario 1b: TLS interception ---------------------------------------------------
    def openssl(self, *args):
        r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (args[0], r.stdout[-300:]))

    def make_tls_files(self):
        """The intercept scenario's certificates, made here: an origin CA and the origin's
        certificate (TLS_ORIGIN_NAME) that nginx serves, that HAProxy's frontend presents
        and that every proxy verifies; a CA for Squid's ssl_bump; politeproxy's from
        --gen-ca. mitmproxy makes its own CA in its confdir."""
        d = os.path.join(self.dir, "tls")
        os.makedirs(d)
        os.chmod(d, 0o755)  # squid and nginx workers read these as their own users
        f = {k: os.path.join(d, v) for k, v in {
            "origin_ca": "origin-ca.pem", "origin_ca_key": "origin-ca.key", "origin_cert": "origin.pem",
            "origin_key": "origin.key", "origin_cert_and_key": "origin-cert-and-key.pem",
            "squid_ca": "squid-ca.pem", "squid_ca_key": "squid-ca.key"}.items()}
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        ca_ext = ["-addext", "basicConstraints=critical,CA:TRUE,pathlen:0", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
        self.openssl("req", "-x509", *ec, "-keyout", f["origin_ca_key"], "-out", f["origin_ca"], "-days", "2",
                     "-subj", "/CN=politeproxy bench origin CA", *ca_ext)
        self.openssl("req", "-x509", *ec, "-keyout", f["origin_key"], "-out", f["origin_cert"], "-days", "2",
                     "-subj", "/CN=" + TLS_ORIGIN_NAME, "-CA", f["origin_ca"], "-CAkey", f["origin_ca_key"],
                     "-addext", "subjectAltName=DNS:" + TLS_ORIGIN_NAME, "-addext", "basicConstraints=critical,CA:FALSE",
                     "-addext", "extendedKeyUsage=serverAuth")
        with open(f["origin_cert_and_key"], "w") as out:
            out.write(open(f["origin_cert"]).read() + open(f["origin_key"]).read())
        self.openssl("req", "-x509", *ec, "-keyout", f["squid_ca_key"], "-out", f["squid_ca"], "-days", "2",
                     "-subj", "/CN=politeproxy bench squid ssl_bump CA", *ca_ext)
        for path in f.values():
            os.chmod(path, 0o644)  # a throwaway benchmark CA: the proxies' own users must read it
        pp = os.path.join(d, "politeproxy-ca")
        os.mkdir(pp)
        r = subprocess.run([self.a.binary, "--gen-ca", pp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("politeproxy --gen-ca: %s" % r.stdout)
        f["politeproxy_ca"], f["politeproxy_ca_key"] = os.path.join(pp, "ca.pem"), os.path.join(pp, "ca.key")
        return f

    def start_intercept_proxy(self, name):
        """Starts one target of the intercept scenario; returns its Proc with .port and
        .cafile (the CA its clients trust)."""
        t, port = self.tls, free_port()
        if name in ("politeproxy", "baseline"):
            proc = self.start_politeproxy("%s-intercept" % name, render(
                "politeproxy-intercept.yaml.in", origin_port=self.nginx_tls_port, ca_cert=t["politeproxy_ca"],
                ca_key=t["politeproxy_ca_key"], origin_ca=t["origin_ca"]),
                self.a.baseline if name == "baseline" else None)
            proc.cafile = t["politeproxy_ca"]
            return proc
        if name == "haproxy":
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            cfg = self.write("haproxy-tls.cfg", render(
                "haproxy-tls.cfg.in", port=port, origin_port=self.nginx_tls_port, maxconn=max(512, min(9000, (nofile - 200) // 2)),
                cert_and_key=t["origin_cert_and_key"], origin_ca=t["origin_ca"], origin_name=TLS_ORIGIN_NAME))
            proc = self.procs.start("haproxy-tls", ["haproxy", "-db", "-f", cfg], PROXY_CPU)
            proc.cafile = t["origin_ca"]
        elif name == "squid":
            sdir = os.path.join(self.dir, "squid-bump")
            os.makedirs(sdir)
            os.chmod(sdir, 0o777)
            db = subprocess.run(["/usr/lib/squid/security_file_certgen", "-c", "-s", os.path.join(sdir, "ssl_db"),
                                 "-M", "16MB"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if db.returncode != 0:
                raise RuntimeError("security_file_certgen -c: %s" % db.stdout)
            subprocess.run(["chown", "-R", "proxy:proxy", os.path.join(sdir, "ssl_db")], check=True)
            hosts = self.write("squid-hosts", "127.0.0.1 %s\n" % TLS_ORIGIN_NAME)
            cfg = self.write("squid-bump.conf", render("squid-bump.conf.in", port=port, dir=sdir, ca_cert=t["squid_ca"],
                                                       ca_key=t["squid_ca_key"], origin_ca=t["origin_ca"],
                                                       hosts_file=hosts))
            proc = self.procs.start("squid-bump", ["squid", "-N", "-f", cfg], PROXY_CPU)
            proc.cafile = t["squid_ca"]
        elif name == "mitmproxy":
            confdir = os.path.join(self.dir, "mitmproxy")
            os.makedirs(confdir)
            proc = self.procs.start("mitmproxy", [
                "mitmdump", "--listen-host", "127.0.0.1", "--listen-port", str(port), "--set", "confdir=" + confdir,
                "--set", "ssl_verify_upstream_trusted_ca=" + t["origin_ca"], "--set", "termlog_verbosity=error",
                "--set", "flow_detail=0", "-s", os.path.join(CONF, "mitmproxy_resolve.py")], PROXY_CPU)
            proc.cafile = os.path.join(confdir, "mitmproxy-ca-cert.pem")
        else:
            raise ValueError(name)
        wait_port(port, proc)
        proc.port = port
        return proc

    def leaf_certificates(self, proc):
        """politeproxy's (minted, cached) leaf certificate counters."""
        count = {labels.get("result"): v for n, labels, v in self.metrics(proc)
                 if n == "politeproxy_tls_leaf_certificates_total"}
        return count.get("minted", 0), count.get("cached", 0)

    def nginx_accepts(self):
        """Connections nginx has accepted so far (stub_status)."""
        return int(http_get("http://127.0.0.1:%d/nginx_status" % self.nginx_port).splitlines()[2].split()[0])

    def intercept_run(self, name, proc, per_connection, seconds, rate=0):
        authority = "%s:%d" % (TLS_ORIGIN_NAME, self.nginx_tls_port)
        argv = [self.a.tls_load, "--sni", TLS_ORIGIN_NAME, "--host", authority, "--path", "/1k",
                "--expect-length", "1024", "--connections", "64", "--seconds", str(seconds),
                "--per-connection", str(per_connection), "--rate", str(rate), "--warmup", "1" if seconds >= 3 else "0"]
        if name == "direct":
            argv += ["--target", "127.0.0.1:%d" % self.nginx_tls_port, "--cafile", self.tls["origin_ca"]]
        elif name == "haproxy":
            argv += ["--target", "127.0.0.1:%d" % proc.port, "--cafile", proc.cafile]
        else:
            argv += ["--target", "127.0.0.1:%d" % proc.port, "--connect", authority,
                     "--cafile", proc.cafile]
        if proc is not None and not proc.alive():
            return {"error": "%s is not running (exit %s)" % (name, proc.popen.returncode)}
        pids = [proc.pid] + children_of(proc.pid) if proc else []  # Squid's certificate helpers count too
        politeproxy = name in ("politeproxy", "baseline")
        leaves0 = self.leaf_certificates(proc) if politeproxy else None
        cpu0 = sum(proc_cpu_seconds(p) for p in pids)
        accepts0 = self.nginx_accepts()
        res = self.run_load(argv, seconds, name="tls_load")
        res["origin_connections"] = self.nginx_accepts() - accepts0 - 1  # minus the status request itself
        if politeproxy and proc.alive():
            res["leaves_minted"], res["leaves_cached"] = (
                b - a for a, b in zip(leaves0, self.leaf_certificates(proc)))
        if proc is not None:
            if not proc.alive():
                res["error"] = "%s died during the run:\n%s" % (name, proc.log_tail())
                return res
            if res.get("requests"):
                res["cpu_us_per_req"] = (sum(proc_cpu_seconds(p) for p in pids) - cpu0) * 1e6 / res["requests"]
        return res

    def scenario_intercept(self):
        a = self.a

        def cell(name, proc, c):
            per_connection, paced = c
            label = intercept_cell(per_connection, paced, a.intercept_rate)
            seconds = a.duration if c == INTERCEPT_CELLS[0] else max(5, a.sweep_duration)
            return (label + "/" + name, label,
                    self.intercept_run(name, proc, per_connection, seconds, a.intercept_rate if paced else 0))

        log("intercept: a warm-up of 2 s each, not counted (the first connection to the origin mints a leaf)")
        self.run_targets("intercept", [p for p in INTERCEPT_PROXIES if p in a.proxies], self.start_intercept_proxy,
                         lambda name, proc: self.intercept_run(name, proc, 0, 2), INTERCEPT_CELLS, cell)

    # ---- scenario 2: politeness -------------------------------------------------------
    def scenario_politeness(self):
        a = self.a
        origin = pp = None
        stop_sampling = threading.Event()
        samples = {"n": 0, "max_in_flight": 0, "per_host_max": {}, "min_waiting": None, "steady": False,
                   "errors": 0, "limit_changes": 0}

        def sampler():
            while not stop_sampling.wait(0.25):
                try:
                    ms = self.metrics(pp)
                except Exception:
                    samples["errors"] += 1
                    continue
                samples["n"] += 1
                waiting = {}
                for n, labels, v in ms:
                    host = labels.get("host")
                    if n == "politeproxy_host_in_flight" and host:
                        samples["per_host_max"][host] = max(samples["per_host_max"].get(host, 0), v)
                        samples["max_in_flight"] = max(samples["max_in_flight"], v)
                    elif n == "politeproxy_host_waiting" and host:
                        waiting[host] = v
                    elif n == "politeproxy_limit_changes_total":
                        samples["limit_changes"] = max(samples["limit_changes"], v)
                if samples["steady"] and waiting:
                    low = min(waiting.get("h%d.bench.test" % i, 0) for i in range(a.polite_hosts))
                    samples["min_waiting"] = low if samples["min_waiting"] is None else min(samples["min_waiting"], low)

        try:
            origin = self.start_slow_origin()
            pp = self.start_politeproxy("politeproxy-politeness", render(
                "politeproxy-politeness.yaml.in", adaptive="true" if a.polite_adaptive else "false"))
            http_get("http://127.0.0.1:%d/__reset" % origin.port)
            sampler_thread = threading.Thread(target=sampler, daemon=True)
            sampler_thread.start()
            warm = 3.0
            result = {}

            def measure():
                time.sleep(warm)
                samples["steady"] = True
                s0, t0 = json.loads(http_get("http://127.0.0.1:%d/__stats" % origin.port)), time.monotonic()
                time.sleep(a.polite_duration)
                s1, t1 = json.loads(http_get("http://127.0.0.1:%d/__stats" % origin.port)), time.monotonic()
                samples["steady"] = False
                done = s1["completed"] - s0["completed"]
                result["origin_rps"] = done / (t1 - t0)
                if done:
                    result["mean_hold"] = (s1["hold_sum"] - s0["hold_sum"]) / done

            m = threading.Thread(target=measure, daemon=True)
            m.start()
            log("politeness: %d hosts x concurrency 2, delay %.0f ms, %d connections, %.0f s" % (
                a.polite_hosts, a.polite_delay * 1000, a.polite_connections, a.polite_duration))
            w = self.run_wrk("http://127.0.0.1:%d/" % pp.port, a.polite_connections, warm + a.polite_duration + 1.5,
                             "hosts.lua", ["rotate", origin.port, "/slow", a.polite_hosts, 2, 3], threads=2)
            m.join(5)
            stop_sampling.set()
            sampler_thread.join(5)
            st = json.loads(http_get("http://127.0.0.1:%d/__stats" % origin.port))
            ideal = a.polite_hosts * 2 / a.polite_delay
            res = {
                "hosts": a.polite_hosts, "connections": a.polite_connections, "delay_s": a.polite_delay,
                "duration_s": a.polite_duration, "ideal_rps": ideal, "origin_rps": result.get("origin_rps"),
                "achieved_ratio": (result["origin_rps"] / ideal) if result.get("origin_rps") else None,
                "origin_mean_hold_s": result.get("mean_hold"),
                "origin_ceiling_rps": (a.polite_hosts * 2 / result["mean_hold"]) if result.get("mean_hold") else None,
                "wrk": w, "origin": st, "origin_peak_per_host": st["peak"], "origin_hosts_seen": st["hosts"],
                "metrics_samples": samples["n"], "metrics_peak_in_flight": samples["max_in_flight"],
                "metrics_min_waiting_steady": samples["min_waiting"], "limit_changes": samples["limit_changes"],
                "adaptive": a.polite_adaptive,
            }
            self.results["politeness"] = res
            if w.get("error"):
                self.fail("politeness", w["error"])
            if st["peak"] > 2:
                self.fail("politeness", "origin saw %d requests in flight for one host (bound 2): %s"
                          % (st["peak"], st["worst_hosts"]))
            log("politeness: origin %.0f req/s of ideal %.0f (%.1f%%); origin peak per host %d; "
                "metrics peak %s; min waiting per host in steady state %s" % (
                    result.get("origin_rps") or 0, ideal, 100 * (res["achieved_ratio"] or 0), st["peak"],
                    samples["max_in_flight"], samples["min_waiting"]))
        finally:
            stop_sampling.set()
            for p in (pp, origin):
                if p:
                    self.procs.stop(p)

    # ---- scenario 3: memory -----------------------------------------------------------
    def warm_up_proxy(self, pp, conns):
        url = "http://warm.bench.test:%d/1k" % self.nginx_port
        r = self.run_wrk("http://127.0.0.1:%d/" % pp.port, conns, 1, "passthrough.lua", ["proxy", url, 1024])
        if r.get("error"):
            raise RuntimeError("warm-up through %s: %s" % (pp.name, r["error"]))

    def scenario_memory_hosts(self):
        a = self.a
        n = a.mem_hosts
        pp = None
        try:
            pp = self.start_politeproxy("politeproxy-memory", render(
                "politeproxy-memory.yaml.in", idle="5s", host_idle_ttl="10m"))
            self.warm_up_proxy(pp, 64)  # same connection count as the load: their sessions are in the baseline
            time.sleep(0.5)
            base_tracked = metric_sum(self.metrics(pp), "politeproxy_hosts_tracked")
            base_rss = proc_status_kb(pp.pid, "VmRSS")
            log("memory: %d distinct hosts through politeproxy (base RSS %d KiB, %d tracked)" % (n, base_rss, base_tracked))

            seen = {"threads": False}

            def threads_done(wrk_pid):
                # wrk's worker threads exit once each has had its share answered (hosts.lua
                # "once"); its main thread would sleep out -d. Watching the thread count
                # instead of scraping /metrics keeps the proxy's memory free of scrapes.
                try:
                    tasks = len(os.listdir("/proc/%d/task" % wrk_pid))
                except OSError:
                    return False
                if tasks > 1:
                    seen["threads"] = True
                return seen["threads"] and tasks <= 1

            t0 = time.monotonic()
            w = self.run_wrk("http://127.0.0.1:%d/" % pp.port, 64, 300, "hosts.lua",
                             ["once", self.nginx_port, "/1k", n, 1, 1024, "m"], until=threads_done)
            load_s = time.monotonic() - t0
            if w.get("error"):
                self.fail("memory (hosts)", w["error"])
            time.sleep(0.5)
            loaded_rss = proc_status_kb(pp.pid, "VmRSS")  # before any scrape: a scrape allocates too
            loaded_hwm = proc_status_kb(pp.pid, "VmHWM")
            loaded_tracked = metric_sum(self.metrics(pp), "politeproxy_hosts_tracked")
            scraped_rss = proc_status_kb(pp.pid, "VmRSS")
            # eviction: the same file with host_idle_ttl 5s, applied by SIGHUP; no scrape
            # until the TTL and a housekeeping tick have passed
            with open(pp.config, "w") as f:
                f.write(render("politeproxy-memory.yaml.in", idle="5s", host_idle_ttl="5s"))
            os.kill(pp.pid, signal.SIGHUP)
            t_hup = time.monotonic()
            time.sleep(7)
            after_tracked = loaded_tracked
            while True:
                after_tracked = metric_sum(self.metrics(pp), "politeproxy_hosts_tracked")
                if after_tracked == 0 or time.monotonic() - t_hup > 30:
                    break
                time.sleep(1)
            evict_s = time.monotonic() - t_hup
            time.sleep(1)
            after_rss = proc_status_kb(pp.pid, "VmRSS")
            grown = loaded_tracked - base_tracked
            res = {
                "hosts": n, "load_seconds": load_s, "load_rps": w.get("rps"), "wrk": w,
                "base_rss_kb": base_rss, "base_tracked": base_tracked,
                "loaded_rss_kb": loaded_rss, "loaded_hwm_kb": loaded_hwm, "loaded_tracked": loaded_tracked,
                "rss_after_one_scrape_kb": scraped_rss,
                "bytes_per_host": (loaded_rss - base_rss) * 1024 / grown if grown > 0 else None,
                "after_rss_kb": after_rss, "after_tracked": after_tracked, "evict_seconds": evict_s,
                "returned_ratio": ((loaded_rss - after_rss) / (loaded_rss - base_rss)) if loaded_rss > base_rss else None,
            }
            self.results["memory"] = res
            if loaded_tracked < base_tracked + n:
                self.fail("memory (hosts)", "only %d hosts tracked after the load (expected %d)" % (loaded_tracked, n))
            if after_tracked != 0:
                self.fail("memory (hosts)", "%d hosts still tracked %.0f s after host_idle_ttl 5s was applied"
                          % (after_tracked, evict_s))
            log("memory: %d tracked, RSS %d -> %d KiB (%s B/host); after eviction %d tracked, RSS %d KiB" % (
                loaded_tracked, base_rss, loaded_rss, fmt(res["bytes_per_host"], 0), after_tracked, after_rss))
        finally:
            if pp:
                self.procs.stop(pp)

    def scenario_memory_parked(self):
        a = self.a
        n, hosts = a.parked, a.park_hosts
        pp = load = origin = None
        try:
            if self.echo_module:
                origin_port, origin_name = self.nginx_port, "nginx (echo_sleep 600)"
            else:
                origin = self.start_slow_origin("slow_origin-park")
                origin_port, origin_name = origin.port, "slow_origin.py (/park)"
            pp = self.start_politeproxy("politeproxy-parked", render("politeproxy-parked.yaml.in"))
            self.warm_up_proxy(pp, 64)
            time.sleep(0.5)
            base_rss = proc_status_kb(pp.pid, "VmRSS")
            log("parked: %d requests over %d hosts (concurrency 1) through politeproxy (base RSS %d KiB)"
                % (n, hosts, base_rss))
            load = self.procs.start("park_load", [sys.executable, os.path.join(HERE, "park_load.py"),
                                                  "--proxy-port", str(pp.port), "--origin-port", str(origin_port),
                                                  "--connections", str(n), "--hosts", str(hosts)],
                                    LOAD_CPU, stdin=subprocess.PIPE)
            deadline = time.monotonic() + 60
            waiting = in_flight = 0
            while time.monotonic() < deadline:
                time.sleep(0.5)
                ms = self.metrics(pp)
                waiting = metric_sum(ms, "politeproxy_host_waiting")
                in_flight = metric_sum(ms, "politeproxy_host_in_flight")
                if waiting + in_flight >= n or not load.alive():
                    break
            time.sleep(1)
            ms = self.metrics(pp)
            waiting = metric_sum(ms, "politeproxy_host_waiting")
            in_flight = metric_sum(ms, "politeproxy_host_in_flight")
            parked_rss = proc_status_kb(pp.pid, "VmRSS")
            load.popen.stdin.close()  # park_load closes every connection and exits
            try:
                load.popen.wait(20)
            except subprocess.TimeoutExpired:
                pass
            load_out = load.log_tail(5)
            self.procs.stop(load)
            released = waiting
            t0 = time.monotonic()
            while time.monotonic() - t0 < 15:
                time.sleep(0.5)
                released = metric_sum(self.metrics(pp), "politeproxy_host_waiting")
                if released == 0:
                    break
            time.sleep(1)
            after_rss = proc_status_kb(pp.pid, "VmRSS")
            res = {
                "requests": n, "hosts": hosts, "origin": origin_name, "base_rss_kb": base_rss,
                "parked_rss_kb": parked_rss, "waiting": waiting, "in_flight": in_flight,
                "bytes_per_parked": (parked_rss - base_rss) * 1024 / waiting if waiting else None,
                "after_rss_kb": after_rss, "waiting_after_close": released, "load_output": load_out.strip(),
            }
            self.results["parked"] = res
            if waiting + in_flight < n:
                self.fail("memory (parked)", "only %d waiting + %d in flight of %d sent; park_load says: %s"
                          % (waiting, in_flight, n, load_out.strip()))
            m = re.search(r"responses (\d+)", load_out)
            if m and int(m.group(1)):
                self.fail("memory (parked)", "%s parked requests were answered early: %s" % (m.group(1), load_out.strip()))
            log("parked: %d waiting + %d in flight, RSS %d -> %d KiB (%s B/parked request); after close %d waiting, "
                "RSS %d KiB" % (waiting, in_flight, base_rss, parked_rss, fmt(res["bytes_per_parked"], 0), released,
                                after_rss))
        finally:
            for p in (load, pp, origin):
                if p:
                    self.procs.stop(p)

    # ---- scenario 4: the gate -----------------------------------------------------------
    def scenario_gate(self):
        if not os.access(self.a.gate_bench, os.X_OK):
            self.fail("gate", "%s not found (build it: target gate_bench)" % self.a.gate_bench)
            return
        log("gate: %s" % self.a.gate_bench)
        p = subprocess.run([self.a.gate_bench], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300, preexec_fn=_child_setup(PROXY_CPU))
        rows = []
        for line in p.stdout.splitlines():
            f = line.split()
            if len(f) == 4 and f[1].isdigit():
                rows.append({"layer": f[0], "hosts": int(f[1]), "requests": int(f[2]), "ns": float(f[3])})
        self.results["gate"] = {"output": p.stdout, "rows": rows, "rc": p.returncode}
        if p.returncode != 0 or not rows:
            self.fail("gate", "gate_bench exit %d: %s" % (p.returncode, p.stdout[-300:]))

    # ---- driver ---------------------------------------------------------------------------
    def run(self):
        if {"passthrough", "intercept", "memory"} & set(self.a.scenarios):
            try:
                self.start_nginx()
            except (KeyboardInterrupt, Interrupted):
                raise
            except Exception as e:
                self.fail("origin", "nginx does not start: %s" % e)
        for s in SCENARIOS:
            if s not in self.a.scenarios:
                continue
            if s in ("passthrough", "intercept", "memory") and not self.nginx_port:
                continue
            try:
                if s == "memory":
                    self.scenario_memory_hosts()
                    self.scenario_memory_parked()
                else:
                    getattr(self, "scenario_" + s)()
            except (KeyboardInterrupt, Interrupted):
                raise
            except Exception as e:
                import traceback
                traceback.print_exc()
                self.fail(s, "%s: %s" % (type(e).__name__, e))


# --------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------
def machine_info():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break

    def first_line(argv):
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
            return p.stdout.strip().splitlines()[0] if p.stdout.strip() else "?"
        except Exception:
            return "?"

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "versions": {
            "nginx": first_line(["nginx", "-v"]).replace("nginx version: ", ""),
            "haproxy": first_line(["haproxy", "-v"]).split(" - ")[0],
            "squid": first_line(["squid", "-v"]),
            "tinyproxy": first_line(["tinyproxy", "-v"]),
            "wrk": first_line(["wrk", "-v"]).split(" Copyright")[0],
        },
    }


def busy_processes():
    busy = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if comm in ("cc1plus", "cc1", "ld", "ld.gold", "ld.lld", "ninja", "make", "cmake", "rustc", "clang++"):
                busy.append("%s(%s)" % (comm, d))
    return busy


def medians(runs, good):
    """What every table row shows of a cell's runs: medians of the good ones, and how many failed."""
    return {"rps": median([r["rps"] for r in good]), "p50": median([r["p50_us"] / 1000 for r in good]),
            "p99": median([r["p99_us"] / 1000 for r in good]), "cpu": median([r.get("cpu_us_per_req") for r in good]),
            "failed": len(runs) - len(good), "runs": len(runs)}


def summarize(bench, info, args, elapsed):
    R = bench.results
    L = []
    L.append("## politeproxy benchmark (tests/bench/run_bench.py)")
    L.append("")
    L.append("- date: %s; run time %.1f min; command: `%s`" % (info["date"], elapsed / 60, info["command"]))
    L.append("- machine: %d cores, %s, %.0f GiB, Linux %s; load average at start %s%s" % (
        info["nproc"], info["cpu"], info["mem_gib"], info["kernel"], " ".join(info["loadavg_start"]),
        ("; **busy: %s**" % ", ".join(info["busy"])) if info["busy"] else ""))
    L.append("- politeproxy %s (commit %s); %s" % (info["politeproxy"], info["commit"],
                                                   "; ".join("%s" % v for v in info["versions"].values())))
    L.append("- method: nginx origin + wrk on core 0, the proxy under test alone on core 1 (one worker/thread); "
             "%d repeat(s), interleaved, medians; 1 KiB c64 runs %ds, the other cells %ds" % (
                 args.repeats, args.duration, args.sweep_duration))
    L.append("")

    pt = R["passthrough"]
    if pt:
        L.append("### 1. Pass-through (one host, limits wide open)")
        L.append("")
        L.append("Ratios are this row / politeproxy's in the same cell. CPU = proxy utime+stime per request; "
                 "RSS = the proxy's peak (VmHWM) during the cell.")
        L.append("")
        L.append("| body | conns | target | req/s | ×pp | p50 ms | p99 ms | p99 ×pp | CPU µs/req | ×pp | peak RSS MiB | ×pp |")
        L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for body, _ in BODIES:
            for conns in CONNS:
                agg = {}
                for name in RUNNABLE:
                    runs = pt.get("%s/%d/%s" % (body, conns, name))
                    if runs is None:
                        continue
                    good = [r for r in runs if not r.get("error")]
                    agg[name] = dict(medians(runs, good),
                                     rss=max([r.get("rss_peak_kb") or 0 for r in good], default=0) / 1024 or None)
                ref = agg.get("politeproxy", {})
                for name, g in agg.items():
                    label = name + (" (%d/%d runs failed)" % (g["failed"], g["runs"]) if g["failed"] else "")
                    if name == "politeproxy":
                        label = "**politeproxy**" + label[len("politeproxy"):]
                    L.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        body, conns, label, fmt(g["rps"], 0), ratio(g["rps"], ref.get("rps")),
                        fmt(g["p50"], 2), fmt(g["p99"], 2), ratio(g["p99"], ref.get("p99")),
                        fmt(g["cpu"], 1), ratio(g["cpu"], ref.get("cpu")),
                        fmt(g["rss"], 1), ratio(g["rss"], ref.get("rss"))))
                R.setdefault("passthrough_medians", {})["%s/%d" % (body, conns)] = agg
        L.append("")
        errs = {}
        for key, runs in pt.items():
            name = key.split("/")[2]
            for r in runs:
                for e in ("connect", "read", "write", "timeout"):
                    if r.get("err_" + e):
                        errs.setdefault(name, {}).setdefault(e, 0)
                        errs[name][e] += r["err_" + e]
        if errs:
            L.append("wrk socket errors over all runs (not failures: every response that arrived was checked): " + "; ".join(
                "%s %s" % (n, ", ".join("%s %d" % kv for kv in sorted(e.items()))) for n, e in sorted(errs.items())) +
                ("; tinyproxy closes each client connection after one response and wrk counts that as a read error"
                 if "tinyproxy" in errs else "") + ".")
            L.append("")

    ic = R["intercept"]
    if ic:
        L.append("### 1b. TLS interception (1 KiB, 64 client connections, TLS on both sides)")
        L.append("")
        L.append("tls_load (tests/bench/tls_load.cpp) sends CONNECT, completes TLS with the proxy (verifying the "
                 "certificate it mints) and sends keep-alive GETs; HAProxy and direct are TLS straight to them. "
                 "Latency (p50, p99) is a request's, from writing it to its response's last byte, as wrk measures; "
                 "set-up is a connection's, from the TCP connect to the end of the TLS handshake, the CONNECT included; "
                 "both without the first second of each run (64 handshakes at once, pools filling). Paced cells send "
                 "at a fixed rate and charge a late request from the moment it was due (as wrk2), also one due while its connection was being replaced. Runs: keep-alive "
                 "as fast as answered %d s, the other cells %d s. " % (args.duration, max(5, args.sweep_duration)) +
                 "Ratios are this row / politeproxy's in the same cell. Origin conns = TCP connections nginx accepted "
                 "per 1000 requests (the proxy's TLS pool reuse). Squid's CPU includes its certificate helpers.")
        L.append("")
        L.append("| client connections | target | req/s | ×pp | p50 ms | p99 ms | p99 ×pp | set-up p50 / p99 ms | CPU µs/req | ×pp "
                 "| origin conns / 1000 req |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for per_connection, paced in INTERCEPT_CELLS:
            label = intercept_cell(per_connection, paced, args.intercept_rate)
            agg = {}
            for name in INTERCEPT_PROXIES:
                runs = ic.get(label + "/" + name)
                if runs is None:
                    continue
                good = [r for r in runs if not r.get("error")]
                agg[name] = dict(
                    medians(runs, good),
                    setup_p50=median([r["setup_p50_us"] / 1000 for r in good if r.get("setup_p50_us")]),
                    setup_p99=median([r["setup_p99_us"] / 1000 for r in good if r.get("setup_p99_us")]),
                    origin_conns=median([1000.0 * r["origin_connections"] / r["requests"] for r in good
                                         if r.get("requests")]))
            ref = agg.get("politeproxy", {})
            labels = {"direct": "direct (TLS to nginx)", "haproxy": "HAProxy TLS termination",
                      "squid": "Squid ssl_bump", "mitmproxy": "mitmproxy"}
            for name, g in agg.items():
                shown = "**politeproxy**" if name == "politeproxy" else labels.get(name, name)
                if g["failed"]:
                    shown += " (%d/%d runs failed)" % (g["failed"], g["runs"])
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |" % (
                    label, shown, fmt(g["rps"], 0), ratio(g["rps"], ref.get("rps")), fmt(g["p50"], 2), fmt(g["p99"], 2),
                    ratio(g["p99"], ref.get("p99")), fmt(g["setup_p50"], 2), fmt(g["setup_p99"], 2),
                    fmt(g["cpu"], 1), ratio(g["cpu"], ref.get("cpu")),
                    fmt(g["origin_conns"], 2)))
            R.setdefault("intercept_medians", {})[label] = agg
        L.append("")
        runs = [r for key, rs in ic.items() if key.endswith("/politeproxy") for r in rs if "leaves_minted" in r]
        if runs:
            L.append("politeproxy's leaf certificates over these runs (tls_leaf_certificates_total): %d minted, %d "
                     "from the cache, for %d client TLS handshakes (the first connection to the name, in the warm-up run, minted its leaf)." % (
                         sum(r["leaves_minted"] for r in runs), sum(r["leaves_cached"] for r in runs),
                         sum(r.get("handshakes", 0) for r in runs)))
            L.append("")

    po = R["politeness"]
    if po:
        L.append("### 2. Politeness (%d hosts × concurrency 2, origin delay %.0f ms)" % (po["hosts"], po["delay_s"] * 1000))
        L.append("")
        L.append("| ideal req/s | achieved req/s (origin, steady %.0f s) | achieved / ideal | origin hold ms (ceiling req/s, achieved / ceiling) "
                 "| origin peak in flight per host "
                 "| hosts at peak | /metrics peak host_in_flight (%d samples) | min host_waiting (steady) | client p50 / p99 ms | wrk req/s | adaptive |"
                 % (po["duration_s"], po["metrics_samples"]))
        L.append("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|")
        w = po["wrk"]
        hold = po.get("origin_mean_hold_s")
        L.append("| %.0f | %s | %s | %s | **%d** | %s | %s | %s | %s / %s | %s | %s |" % (
            po["ideal_rps"], fmt(po["origin_rps"], 0),
            ("%.1f%%" % (100 * po["achieved_ratio"])) if po["achieved_ratio"] else "–",
            ("%.2f (%.0f, %.1f%%)" % (hold * 1000, po["origin_ceiling_rps"], 100 * po["origin_rps"] / po["origin_ceiling_rps"]))
            if hold else "–",
            po["origin_peak_per_host"], ", ".join("%s: %d hosts" % kv for kv in sorted(po["origin"]["peak_histogram"].items())),
            fmt(po["metrics_peak_in_flight"], 0), fmt(po["metrics_min_waiting_steady"], 0),
            fmt(w.get("p50_us", 0) / 1000, 1), fmt(w.get("p99_us", 0) / 1000, 1), fmt(w.get("rps"), 0),
            "on (hard_max 2)" if po["adaptive"] else "off"))
        L.append("")
        L.append("Load: wrk, %d connections rotating over the %d host names (so ~%d requests per host outstanding: "
                 "2 in flight, the rest parked). Origin: slow_origin.py (asyncio), which counts in-flight requests "
                 "per Host exactly. Hold = the origin's mean time from reading a request to writing its response (the delay plus "
                 "its own lateness under this load): hosts × 2 / hold is the most any proxy could get through." % (
                     po["connections"], po["hosts"], po["connections"] // po["hosts"]))
        L.append("")

    me, pk = R["memory"], R["parked"]
    if me or pk:
        L.append("### 3. Memory (politeproxy)")
        L.append("")
        L.append("| measurement | before | loaded | per unit | after release | returned |")
        L.append("|---|---:|---:|---:|---:|---:|")
        if me:
            L.append("| %d distinct hosts, each used once (%.0f req/s, %.0f s) | %.1f MiB, %d hosts | %.1f MiB, %d hosts "
                     "(peak %.1f MiB; %.1f MiB after one /metrics scrape) | **%s B per tracked host** | %.1f MiB, %d hosts (%.0f s after host_idle_ttl 5s) | %s |" % (
                         me["hosts"], me["load_rps"] or 0, me["load_seconds"], me["base_rss_kb"] / 1024, me["base_tracked"],
                         me["loaded_rss_kb"] / 1024, me["loaded_tracked"], me["loaded_hwm_kb"] / 1024, me["rss_after_one_scrape_kb"] / 1024,
                         fmt(me["bytes_per_host"], 0), me["after_rss_kb"] / 1024, me["after_tracked"], me["evict_seconds"],
                         ("%d%% of the growth" % round(100 * me["returned_ratio"])) if me["returned_ratio"] is not None else "–"))
        if pk:
            L.append("| %d requests parked over %d hosts (concurrency 1; origin %s) | %.1f MiB | %.1f MiB, %d waiting + %d in flight "
                     "| **%s B per parked request** | %.1f MiB, %d waiting (clients closed) | %s |" % (
                         pk["requests"], pk["hosts"], pk["origin"], pk["base_rss_kb"] / 1024, pk["parked_rss_kb"] / 1024,
                         pk["waiting"], pk["in_flight"], fmt(pk["bytes_per_parked"], 0), pk["after_rss_kb"] / 1024,
                         pk["waiting_after_close"],
                         ("%d%% of the growth" % round(100 * (pk["parked_rss_kb"] - pk["after_rss_kb"]) /
                                                       (pk["parked_rss_kb"] - pk["base_rss_kb"])))
                         if pk["parked_rss_kb"] > pk["base_rss_kb"] else "–"))
        L.append("")
        L.append("RSS is VmRSS of the proxy process; per unit = ΔRSS / Δhosts_tracked, and ΔRSS / requests waiting "
                 "(the parked figure includes each request's client connection and session).")
        L.append("")

    ga = R["gate"]
    if ga and ga["rows"]:
        L.append("### 4. The gate alone (build/gate_bench, sans-io, core 1)")
        L.append("")
        L.append("| layer | hosts | requests | ns per acquire+release |")
        L.append("|---|---:|---:|---:|")
        for r in ga["rows"]:
            L.append("| %s | %d | %d | %.1f |" % (r["layer"], r["hosts"], r["requests"], r["ns"]))
        L.append("")

    goals = evaluate_goals(R, args.intercept_rate)
    if goals:
        L.append("### Goals (issues 4 and 9), from this run")
        L.append("")
        L.append("| goal | measured | met |")
        L.append("|---|---|---|")
        for g, m, ok in goals:
            L.append("| %s | %s | %s |" % (g, m, "yes" if ok else ("**no**" if ok is False else "–")))
        L.append("")
    if bench.failures:
        L.append("### Failures")
        L.append("")
        for f in bench.failures:
            L.append("- " + f.replace("\n", " ")[:400])
        L.append("")
    return "\n".join(L)


def evaluate_goals(R, rate):
    goals = []
    med = R.get("passthrough_medians", {}).get("1k/64", {})
    pp, ha, sq = med.get("politeproxy"), med.get("haproxy"), med.get("squid")

    def both(x, y):
        return x is not None and y is not None

    if pp and ha:
        if both(pp["rps"], ha["rps"]):
            goals.append(("1 KiB c64: req/s >= HAProxy", "%.0f vs %.0f (%.2fx)" % (pp["rps"], ha["rps"], pp["rps"] / ha["rps"]),
                          pp["rps"] >= ha["rps"]))
        if both(pp["cpu"], ha["cpu"]):
            goals.append(("1 KiB c64: CPU/request <= HAProxy", "%.1f vs %.1f µs (%.2fx)" % (pp["cpu"], ha["cpu"], pp["cpu"] / ha["cpu"]),
                          pp["cpu"] <= ha["cpu"]))
        if both(pp["p99"], ha["p99"]):
            goals.append(("1 KiB c64: p99 <= 1.2x HAProxy", "%.2f vs %.2f ms (%.2fx)" % (pp["p99"], ha["p99"], pp["p99"] / ha["p99"]),
                          pp["p99"] <= 1.2 * ha["p99"]))
    if pp and sq:
        if both(pp["rps"], sq["rps"]):
            goals.append(("1 KiB c64: req/s >= 1.5x Squid", "%.2fx" % (pp["rps"] / sq["rps"]), pp["rps"] >= 1.5 * sq["rps"]))
        if both(pp["cpu"], sq["cpu"]):
            goals.append(("1 KiB c64: CPU/request <= Squid / 1.5", "Squid uses %.2fx politeproxy's" % (sq["cpu"] / pp["cpu"]),
                          sq["cpu"] >= 1.5 * pp["cpu"]))
    im = R.get("intercept_medians", {})
    keep = im.get(intercept_cell(*INTERCEPT_CELLS[0], rate), {})
    ipp, isq, iha = keep.get("politeproxy"), keep.get("squid"), keep.get("haproxy")
    if ipp and isq and both(ipp["cpu"], isq["cpu"]):
        goals.append(("intercept keep-alive: CPU/request <= 0.5x Squid ssl_bump", "%.1f vs %.1f µs (%.2fx)" % (
            ipp["cpu"], isq["cpu"], ipp["cpu"] / isq["cpu"]), ipp["cpu"] <= 0.5 * isq["cpu"]))
    if ipp and iha and both(ipp["cpu"], iha["cpu"]):
        goals.append(("intercept keep-alive: CPU/request <= 1.2x HAProxy TLS termination", "%.1f vs %.1f µs (%.2fx)" % (
            ipp["cpu"], iha["cpu"], ipp["cpu"] / iha["cpu"]), ipp["cpu"] <= 1.2 * iha["cpu"]))
    def p99_ratio(paced, name):
        k = im.get(intercept_cell(0, paced, rate), {}).get(name)
        f = im.get(intercept_cell(INTERCEPT_CELLS[1][0], paced, rate), {}).get(name)
        return (k["p99"], f["p99"]) if k and f and k["p99"] and f["p99"] else None

    for paced in (True, False):  # the goal at a rate every TLS target sustains; at saturation for the record
        pp_p99, ha_p99 = p99_ratio(paced, "politeproxy"), p99_ratio(paced, "haproxy")
        if pp_p99:
            goals.append(("intercept, %s: p99 with a new TLS connection every %d requests <= 2x keep-alive p99" % (
                "%d req/s" % rate if paced else "as fast as answered", INTERCEPT_CELLS[1][0]),
                "%.2f vs %.2f ms (%.2fx)%s" % (pp_p99[1], pp_p99[0], pp_p99[1] / pp_p99[0],
                                             "; HAProxy TLS %.2fx" % (ha_p99[1] / ha_p99[0]) if ha_p99 else ""),
                pp_p99[1] <= 2 * pp_p99[0]))
    po = R.get("politeness")
    if po:
        if po["achieved_ratio"] is not None:
            goals.append(("politeness: >= 95% of ideal", "%.1f%%" % (100 * po["achieved_ratio"]), po["achieved_ratio"] >= 0.95))
        goals.append(("politeness: origin peak per host <= 2", "%d" % po["origin_peak_per_host"], po["origin_peak_per_host"] <= 2))
    me = R.get("memory")
    if me and me["bytes_per_host"] is not None:
        goals.append(("<= 1 KiB per tracked idle host", "%.0f B" % me["bytes_per_host"], me["bytes_per_host"] <= 1024))
        goals.append(("memory returns after idle eviction", "hosts_tracked %d -> %d, RSS %.1f -> %.1f MiB (%s of growth returned)" % (
            me["loaded_tracked"], me["after_tracked"], me["loaded_rss_kb"] / 1024, me["after_rss_kb"] / 1024,
            ("%d%%" % round(100 * me["returned_ratio"])) if me["returned_ratio"] is not None else "–"),
            me["after_tracked"] == 0 and (me["returned_ratio"] or 0) >= 0.5))
    pk = R.get("parked")
    if pk and pk["bytes_per_parked"] is not None:
        goals.append(("<= 16 KiB per parked request", "%.0f B" % pk["bytes_per_parked"], pk["bytes_per_parked"] <= 16384))
    ga = R.get("gate")
    if ga and ga["rows"]:
        worst = max((r for r in ga["rows"] if r["hosts"] == 100000), key=lambda r: r["ns"], default=None)
        if worst:
            goals.append(("gate < 1 µs per acquire+release at 100k hosts", "%.0f ns (%s layer, the slower one)" % (
                worst["ns"], worst["layer"]), worst["ns"] < 1000))
    return goals


# --------------------------------------------------------------------------------------
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
        LOAD_CPU = PROXY_CPU = 0
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
    text = summarize(bench, info, a, elapsed)
    with open(out, "w") as f:
        f.write(text + "\n")
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"info": info, "args": vars(a), "results": bench.results, "failures": bench.failures,
                   "elapsed_s": elapsed}, f, indent=1, default=str)
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
