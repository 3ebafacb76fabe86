"""One benchmark run: Bench holds its temporary directory, its processes, its results
and failures; it runs load generators (wrk with lua/common.lua, build/tls_load) on the
load core and reads their BENCH_JSON line, starts politeproxy and the origins (nginx,
slow_origin.py), and run() drives the scenarios asked for. The scenarios themselves are
mixed in: bench_side_by_side (1 pass-through, 1b TLS interception: politeproxy against
other proxies) and bench_politeproxy_alone (2 politeness, 3 memory, 4 the gate)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback

import bench_plan as plan
from bench_http import LISTEN_RE, free_port, http_get, parse_metrics
from bench_plan import BODIES, HERE, LUA, SCENARIOS, render
from bench_politeproxy_alone import PoliteproxyAloneScenarios
from bench_procs import Interrupted, Proc, Procs, _child_setup, children_of, log, wait_log_line, wait_port
from bench_side_by_side import SideBySideScenarios


class Bench(SideBySideScenarios, PoliteproxyAloneScenarios):
    """One run (see above); the scenario_* methods come from the two mixins."""

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
    def guarded(self, body):
        """Runs body(), a benchmark's main part: Ctrl-C, Interrupted (a signal) or any other
        exception is a failure of the run (traceback printed), and every process it started
        is stopped afterwards, whichever way it ended, with SIGINT and SIGTERM ignored while
        they stop (a second Ctrl-C cannot leave one running); SIGTERM stays ignored after."""
        try:
            body()
        except (KeyboardInterrupt, Interrupted) as e:
            self.fail("benchmark", "interrupted (%s)" % (e or "Ctrl-C"))
        except Exception as e:
            traceback.print_exc()
            self.fail("benchmark", "%s: %s" % (type(e).__name__, e))
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.procs.stop_all()
            signal.signal(signal.SIGINT, signal.default_int_handler)

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
                                 preexec_fn=_child_setup(plan.LOAD_CPU), start_new_session=True)
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
        proc = self.procs.start(name, [binary or self.a.binary, "--config", cfg], plan.PROXY_CPU)
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
                                                "-c", conf], plan.LOAD_CPU)
        wait_port(port, self.nginx)
        self.nginx.extra_pids = children_of(self.nginx.pid)
        self.nginx_port = port
        body = http_get("http://127.0.0.1:%d/1k" % port)
        assert len(body) == 1024, "nginx serves /1k"

    def start_slow_origin(self, name="slow_origin"):
        proc = self.procs.start(name, [sys.executable, os.path.join(HERE, "slow_origin.py"), "--port", "0",
                                       "--delay", str(self.a.polite_delay)], plan.LOAD_CPU)
        m = wait_log_line(proc, re.compile(r"slow_origin: listening (\d+)"))
        proc.port = int(m.group(1))
        return proc

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
