"""Scenarios 1 and 1b: politeproxy side by side with other proxies, as a mixin of
bench_runner.Bench.

  1  pass-through: one host, limits wide open; 1 KiB and 100 KiB bodies; 1, 64, 256
     connections; direct to nginx, HAProxy, Squid, tinyproxy, politeproxy
  1b TLS interception: 1 KiB over 64 client connections, TLS on both sides; direct
     TLS to nginx, HAProxy terminating TLS, Squid ssl_bump, mitmproxy, politeproxy

run_targets() starts each target, warms it up, and runs every cell on every target
--repeats times, interleaved."""
import os
import resource
import subprocess

import bench_plan as plan
from bench_http import free_port, http_get
from bench_plan import (BODIES, CONF, CONNS, HEADLINE, INTERCEPT_CELLS, INTERCEPT_PROXIES,
                        PASSTHROUGH_PROXIES, TLS_ORIGIN_NAME, cost_config, intercept_cell, render)
from bench_procs import children_of, log, proc_cpu_seconds, proc_status_kb, reset_peak_rss, wait_port
from bench_report import fmt


class SideBySideScenarios:
    """Mixed into Bench: uses its a (the arguments), dir, procs, results, nginx ports,
    tls, fail, write, run_wrk, run_load, start_politeproxy and metrics."""

    # ---- proxies -----------------------------------------------------------------------
    def start_proxy(self, name):
        port = free_port()
        if name == "haproxy":
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            maxconn = max(512, min(9000, (nofile - 200) // 2))  # haproxy refuses to start above its fd limit
            cfg = self.write("haproxy.cfg", render("haproxy.cfg.in", port=port, origin_port=self.nginx_port,
                                                   maxconn=maxconn))
            proc = self.procs.start(name, ["haproxy", "-db", "-f", cfg], plan.PROXY_CPU)
        elif name == "squid":
            sdir = os.path.join(self.dir, "squid")
            os.makedirs(sdir, exist_ok=True)
            os.chmod(sdir, 0o777)  # squid started as root drops to its own user
            cfg = self.write("squid.conf", render("squid.conf.in", port=port, dir=sdir))
            proc = self.procs.start(name, ["squid", "-N", "-f", cfg], plan.PROXY_CPU)
        elif name == "tinyproxy":
            cfg = self.write("tinyproxy.conf", render("tinyproxy.conf.in", port=port, dir=self.dir))
            proc = self.procs.start(name, ["tinyproxy", "-d", "-c", cfg], plan.PROXY_CPU)
        elif name == "politeproxy":
            return self.start_politeproxy("politeproxy", cost_config())
        elif name == "baseline":  # --baseline: another politeproxy binary, for an A/B
            return self.start_politeproxy("baseline", cost_config(), self.a.baseline)
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
            proc = self.procs.start("haproxy-tls", ["haproxy", "-db", "-f", cfg], plan.PROXY_CPU)
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
            proc = self.procs.start("squid-bump", ["squid", "-N", "-f", cfg], plan.PROXY_CPU)
            proc.cafile = t["squid_ca"]
        elif name == "mitmproxy":
            confdir = os.path.join(self.dir, "mitmproxy")
            os.makedirs(confdir)
            proc = self.procs.start("mitmproxy", [
                "mitmdump", "--listen-host", "127.0.0.1", "--listen-port", str(port), "--set", "confdir=" + confdir,
                "--set", "ssl_verify_upstream_trusted_ca=" + t["origin_ca"], "--set", "termlog_verbosity=error",
                "--set", "flow_detail=0", "-s", os.path.join(CONF, "mitmproxy_resolve.py")], plan.PROXY_CPU)
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
