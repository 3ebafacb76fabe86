"""A Prometheus of the test's own (Debian's `prometheus`) that scrapes a proxy's admin
listener on loopback every second, started by PID on a free port with its storage in the
test's directory, and dies with the test process (PR_SET_PDEATHSIG).

    prom = t.prometheus(["127.0.0.1:%d" % proxy.admin_port])   # stopped at cleanup
    prom.wait_for_scrapes(3)
    prom.query('sum(politeproxy_host_in_flight)')              # the result list
"""

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request

import yaml

from harness import TestFailure, _pdeathsig, free_port, log, SLOW


class PrometheusServer:
    def __init__(self, workdir, targets, interval="1s"):
        self.port = free_port()
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(self.dir, exist_ok=True)
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            yaml.safe_dump({"global": {"scrape_interval": interval, "evaluation_interval": interval},
                            "scrape_configs": [{"job_name": "politeproxy", "static_configs": [{"targets": targets}]}]}, f)
        self.proc = None

    def start(self, timeout=20):
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + self.config, "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, "prometheus.log"), "wb"), preexec_fn=_pdeathsig)
        deadline = time.monotonic() + timeout * SLOW
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise TestFailure("prometheus on port %d did not start: %s" % (self.port, self.log_tail()))
            time.sleep(0.1)
        log("prometheus pid %d on 127.0.0.1:%d" % (self.proc.pid, self.port))
        return self

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "prometheus.log"), errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def api(self, path, **params):
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (self.port, path, urllib.parse.urlencode(params))
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        if doc.get("status") != "success":
            raise TestFailure("prometheus %s %s: %s" % (path, params, doc))
        return doc["data"]

    def query(self, expr):
        """An instant query now: the list of result series."""
        return self.api("query", query=expr, time="%.3f" % time.time())["result"]

    def wait_for_scrapes(self, n, timeout=30):
        """Waits until the target was scraped successfully n times."""
        deadline = time.monotonic() + timeout * SLOW
        while time.monotonic() < deadline:
            r = self.query("count_over_time(up[1m])")
            up = self.query("up")
            if r and up and float(r[0]["value"][1]) >= n and float(up[0]["value"][1]) == 1:
                return
            time.sleep(0.5)
        raise TestFailure("prometheus did not scrape the proxy %d times: up=%s %s" % (n, self.query("up"), self.log_tail()))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
