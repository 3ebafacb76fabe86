"""The proxy under test as a process: Proxy starts the binary with a temporary YAML
config, parses its "politeproxy: listening proxy=... admin=..." line, keeps draining its
output, stops it (SIGTERM, then SIGKILL) and reads its admin listener (/hosts,
/metrics). Every proxy started is recorded by PID, so the runner can kill what is left
(_kill_all_live) whatever happens; _pdeathsig makes a child die with the test."""
import ctypes
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

from harness_checks import SLOW, TestFailure, check, log, wait_until
from harness_config import dump_config
from harness_metrics import parse_metrics

LISTEN_RE = re.compile(
    r"politeproxy: listening proxy=(?P<ph>[0-9.]+):(?P<pp>\d+) admin=(?P<ah>[0-9.]+):(?P<ap>\d+)")
# the start-up wait and the stop grace stretch by SLOW (harness_checks)
STARTUP_TIMEOUT = 15.0 * SLOW
STOP_GRACE = 5.0 * SLOW


def _pdeathsig():
    # the proxy dies with the test process (a ctest timeout SIGKILLs only the test);
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits: start proxies from
    # the main thread
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass


class Proxy:
    def __init__(self, binary, config, workdir, name="proxy", extra_args=()):
        self.binary = binary
        self.config = config
        self.name = name
        self.extra_args = list(extra_args)
        self.config_path = os.path.join(workdir, "%s.yaml" % name)
        self.proc = None
        self.pid = None
        self.port = None
        self.admin_port = None
        self.lines = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._reader = None
        self.returncode = None

    # -- lifecycle ----------------------------------------------------------------
    def start(self):
        with open(self.config_path, "w") as f:
            f.write(self.config if isinstance(self.config, str) else dump_config(self.config))
        cmd = [self.binary, "--config", self.config_path,
               "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"] + self.extra_args
        log("%s: starting %s" % (self.name, " ".join(cmd)))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
        self.pid = self.proc.pid
        _register_pid(self.pid, self)
        self._reader = threading.Thread(target=self._read_output, daemon=True,
                                        name="%s-stderr" % self.name)
        self._reader.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None:
                self._reader.join(1)
                raise TestFailure("%s exited with %s before printing its listening line;"
                                  " output:\n%s" % (self.name, self.proc.returncode,
                                                    self.tail()))
            if time.monotonic() > deadline:
                raise TestFailure("%s printed no 'politeproxy: listening ...' line within"
                                  " %.0fs; output:\n%s" % (self.name, STARTUP_TIMEOUT,
                                                           self.tail()))
        log("%s: pid %d proxy=127.0.0.1:%d admin=127.0.0.1:%d"
            % (self.name, self.pid, self.port, self.admin_port))
        return self

    def _read_output(self):
        # stdout and stderr share one pipe; drain it until EOF so it never fills
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                self.lines.append(line)
                if len(self.lines) > 20000:
                    del self.lines[:10000]
            if not self._ready.is_set():
                m = LISTEN_RE.search(line)
                if m:
                    self.port = int(m.group("pp"))
                    self.admin_port = int(m.group("ap"))
                    self._ready.set()
        self.proc.stdout.close()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_GRACE seconds. Returns the exit code."""
        if self.proc is None:
            return None
        signalled = self.proc.poll() is None
        if signalled:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                log("%s: still running %.0fs after SIGTERM, sending SIGKILL"
                    % (self.name, STOP_GRACE))
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        self.returncode = self.proc.returncode
        if self._reader is not None:
            self._reader.join(2)
        _unregister_pid(self.pid)
        if signalled and self.returncode not in (0, -signal.SIGKILL):
            log("%s: note: exit code after SIGTERM was %s (SPEC says 0)"
                % (self.name, self.returncode))
        return self.returncode

    def kill_now(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def tail(self, n=60):
        with self._lock:
            lines = self.lines[-n:]
        return "\n".join("    | " + l for l in lines) if lines else "    | (no output)"

    # -- addresses ----------------------------------------------------------------
    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def admin_url(self):
        return "http://127.0.0.1:%d" % self.admin_port

    # -- admin --------------------------------------------------------------------
    def admin_get(self, path, timeout=5):
        """(status, headers, body bytes) of GET path on the admin listener."""
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            conn.close()

    def hosts(self):
        """/hosts as {key: entry}."""
        status, _, body = self.admin_get("/hosts")
        check(status == 200, "%s: GET /hosts answered %d" % (self.name, status))
        return {h["key"]: h for h in json.loads(body)}

    def hosts_settled(self, timeout=2.0):
        """/hosts once no host has a request in flight or waiting (or, after `timeout`, as it
        is). A client can have a response's last byte, and ask, before the worker that wrote
        it has run on to give the slot back."""
        def idle():
            view = self.hosts()
            return view if all(h["in_flight"] == 0 and h["waiting"] == 0 for h in view.values()) else None
        return wait_until(idle, timeout) or self.hosts()

    def metrics_text(self):
        status, _, body = self.admin_get("/metrics")
        check(status == 200, "%s: GET /metrics answered %d" % (self.name, status))
        return body.decode("utf-8", "replace")

    def metrics(self):
        return parse_metrics(self.metrics_text())


# the live proxies, by PID: killed whole on a hard timeout or a signal
_live = {}  # pid -> Proxy
_live_lock = threading.Lock()


def _register_pid(pid, p):
    with _live_lock:
        _live[pid] = p


def _unregister_pid(pid):
    with _live_lock:
        _live.pop(pid, None)


def _kill_all_live():
    with _live_lock:
        procs = list(_live.values())
    for p in procs:
        p.kill_now()
