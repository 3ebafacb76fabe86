"""Integration-test harness for politeproxy.

- locate the binary (--proxy PATH, or env POLITEPROXY_BIN)
- start/stop the proxy with a temporary YAML config built from a dict, parse its
  "politeproxy: listening proxy=... admin=..." line, keep draining its stderr
- fetch and parse /metrics into {(name, ((label, value), ...)): float}
- send requests through the proxy (http.client with absolute-form targets, or raw
  sockets), N at once from threads
- a hard per-test timeout and cleanup of every process started, by PID, even on failure

A test file looks like:

    import harness as H
    def test(t):                     # t is a harness.TestContext
        origin = t.origin()
        proxy = t.proxy(H.base_config(hosts={...}))
        ...
        H.check(cond, "message")     # or a plain assert with a message
    if __name__ == "__main__":
        H.main(test, timeout=40)
"""

import argparse
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from origin import Origin, make_cert  # noqa: E402

LISTEN_RE = re.compile(
    r"politeproxy: listening proxy=(?P<ph>[0-9.]+):(?P<pp>\d+) admin=(?P<ah>[0-9.]+):(?P<ap>\d+)")
# Sanitizer builds run slower (scripts/test-sanitizers.sh sets POLITEPROXY_SLOW): the
# hard per-test timeout and the start-up wait stretch by this factor; assertions do not.
SLOW = float(os.environ.get("POLITEPROXY_SLOW", "1"))
STARTUP_TIMEOUT = 15.0 * SLOW
STOP_GRACE = 5.0 * SLOW


class TestFailure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def log(*a):
    print("[%7.3f]" % (time.monotonic() - _T0), *a, flush=True)


_T0 = time.monotonic()


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------
def base_config(hosts=None, tls_port=None, allow_loopback=True, **defaults_over):
    """The standard test config: generous defaults, *.test -> 127.0.0.1."""
    defaults = {
        "concurrency": 2,
        "rate": 100,
        "burst": 100,
        "queue": {"max_waiting": 1000, "max_wait": "60s"},
        "timeouts": {"connect": "5s", "response_headers": "30s", "idle": "30s"},
    }
    for k, v in defaults_over.items():
        if isinstance(v, dict) and isinstance(defaults.get(k), dict):
            defaults[k] = dict(defaults[k], **v)
        else:
            defaults[k] = v
    cfg = {
        "listen": "127.0.0.1:0",
        "admin_listen": "127.0.0.1:0",
        "workers": 2,
        "drain_timeout": "2s",
        "defaults": defaults,
        "hosts": dict(hosts or {}),
        "resolve": {"*.test": "127.0.0.1"},
        "security": {"connect_ports": [443] + ([tls_port] if tls_port else [])},
    }
    if allow_loopback:
        cfg["security"]["allow_destinations"] = ["127.0.0.0/8"]
    return cfg


def dump_config(cfg):
    return yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False)


# --------------------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------------------
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

    def metrics_text(self):
        status, _, body = self.admin_get("/metrics")
        check(status == 200, "%s: GET /metrics answered %d" % (self.name, status))
        return body.decode("utf-8", "replace")

    def metrics(self):
        return parse_metrics(self.metrics_text())


# --------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------
_METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse_metrics(text):
    """Prometheus text format -> {(name, ((label, value), ...sorted)): float}."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _METRIC_RE.match(line)
        if not m:
            raise TestFailure("unparseable /metrics line: %r" % line)
        name, labels_s, value = m.groups()
        labels = {}
        if labels_s:
            pos = 0
            while pos < len(labels_s):
                lm = _LABEL_RE.match(labels_s, pos)
                if not lm or lm.end() == pos:
                    raise TestFailure("unparseable labels in /metrics line: %r" % line)
                labels[lm.group(1)] = _unescape(lm.group(2))
                pos = lm.end()
        v = {"+Inf": float("inf"), "-Inf": float("-inf"), "NaN": float("nan")}.get(value)
        out[(name, tuple(sorted(labels.items())))] = float(value) if v is None else v
    return out


def mget(metrics, name, default=None, **labels):
    """Value of the series with exactly these labels, or default."""
    return metrics.get((name, tuple(sorted(labels.items()))), default)


def msum(metrics, name, **labels):
    """Sum over the series of `name` whose labels include `labels`."""
    total = 0.0
    for (n, ls), v in metrics.items():
        if n == name and all(dict(ls).get(k) == val for k, val in labels.items()):
            total += v
    return total


def mseries(metrics, name):
    return {ls: v for (n, ls), v in metrics.items() if n == name}


# --------------------------------------------------------------------------------------
# requests through the proxy
# --------------------------------------------------------------------------------------
class Result:
    def __init__(self, tag=None):
        self.tag = tag
        self.status = None
        self.reason = None
        self.headers = []
        self.body = b""
        self.error = None
        self.t_start = None
        self.t_end = None

    @property
    def elapsed(self):
        return None if self.t_end is None else self.t_end - self.t_start

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def json(self):
        return json.loads(self.body.decode())

    def __repr__(self):
        return "<Result %s status=%s error=%s elapsed=%s>" % (
            self.tag, self.status, self.error,
            None if self.elapsed is None else "%.3f" % self.elapsed)


def request(proxy, url, method="GET", body=None, headers=None, timeout=20, tag=None,
            encode_chunked=False):
    """One request through the proxy: absolute-form target on a fresh connection."""
    r = Result(tag or url)
    r.t_start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        conn.request(method, url, body=body, headers=hdrs, encode_chunked=encode_chunked)
        resp = conn.getresponse()
        r.status, r.reason = resp.status, resp.reason
        r.headers = resp.getheaders()
        r.body = resp.read()
    except Exception as e:  # noqa: BLE001 - recorded, the test decides
        r.error = "%s: %s" % (type(e).__name__, e)
    finally:
        r.t_end = time.monotonic()
        conn.close()
    return r


def concurrent(proxy, urls, timeout=30, **kw):
    """Send every url at once (one thread and connection each). Results in order."""
    results = [None] * len(urls)
    barrier = threading.Barrier(len(urls) + 1)

    def run(i, u):
        try:
            barrier.wait(10)
        except threading.BrokenBarrierError:
            pass
        results[i] = request(proxy, u, timeout=timeout, tag="#%d %s" % (i, u), **kw)

    threads = [threading.Thread(target=run, args=(i, u), daemon=True)
               for i, u in enumerate(urls)]
    for th in threads:
        th.start()
    barrier.wait(10)
    deadline = time.monotonic() + timeout + 10
    for th in threads:
        th.join(max(0.1, deadline - time.monotonic()))
    for i, res in enumerate(results):
        if res is None:
            res = results[i] = Result("#%d %s" % (i, urls[i]))
            res.error = "client thread still running after %ss" % (timeout + 10)
    return results


class Background:
    """concurrent() in a background thread: start now, .wait() later."""

    def __init__(self, proxy, urls, timeout=30, **kw):
        self.results = None
        self._t = threading.Thread(target=self._run, args=(proxy, urls, timeout, kw),
                                   daemon=True)
        self._t.start()

    def _run(self, proxy, urls, timeout, kw):
        self.results = concurrent(proxy, urls, timeout=timeout, **kw)

    def wait(self, timeout=60):
        self._t.join(timeout)
        check(not self._t.is_alive(), "background requests still running after %ss"
              % timeout)
        return self.results


def brief(host_stats):
    """Origin host stats without the long lists, for messages."""
    return {k: v for k, v in host_stats.items() if k not in ("arrivals", "requests")}


def summarize(results):
    out = {}
    for r in results:
        key = r.status if r.error is None else "error"
        out[key] = out.get(key, 0) + 1
    return out


# --------------------------------------------------------------------------------------
# raw sockets
# --------------------------------------------------------------------------------------
class RawResponse:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def __repr__(self):
        return "<RawResponse %s %s %s>" % (self.status, self.reason, self.headers)


class RawClient:
    """A plain TCP connection to the proxy port for hand-written requests."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.raw = b""  # every byte ever received, for tests that check exact framing
        self.eof = False
        self.send_error = None

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as e:
            # the proxy may answer and close before reading everything (e.g. 431)
            self.send_error = "%s: %s" % (type(e).__name__, e)

    def _fill(self, deadline):
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        except OSError:
            self.eof = True
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        self.raw += chunk
        return True

    def read_response(self, timeout=10, head_request=False):
        """Parse one response; None when nothing (complete) arrived in time."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline):
                return None
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ?(.*)", lines[0])
        if not m:
            raise TestFailure("not an HTTP status line from the proxy: %r" % lines[0])
        status = int(m.group(1))
        headers = []
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers.append((k.strip(), v.strip()))
        hd = {k.lower(): v for k, v in headers}
        self.buf = rest
        if 100 <= status < 200:
            return RawResponse(status, m.group(2), headers, b"")
        if head_request or status in (204, 304):
            return RawResponse(status, m.group(2), headers, b"")
        if "chunked" in hd.get("transfer-encoding", "").lower():
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    if not self._fill(deadline):
                        return None
                line, _, self.buf = self.buf.partition(b"\r\n")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while b"\r\n" not in self.buf:  # (no trailers expected)
                        if not self._fill(deadline):
                            break
                    self.buf = self.buf.partition(b"\r\n")[2]
                    break
                while len(self.buf) < size + 2:
                    if not self._fill(deadline):
                        return None
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
        elif "content-length" in hd:
            n = int(hd["content-length"])
            while len(self.buf) < n:
                if not self._fill(deadline):
                    return None
            body, self.buf = self.buf[:n], self.buf[n:]
        else:
            while self._fill(deadline):
                pass
            body, self.buf = self.buf, b""
        return RawResponse(status, m.group(2), headers, body)

    def read_all_responses(self, first_timeout=10, settle=0.5):
        """Every response on this connection: wait up to first_timeout for the first
        final (>= 200) response, then up to `settle` seconds for anything more.
        Returns (responses incl. any 1xx, leftover bytes); self.first_response_at is the
        time.monotonic() when the first final response was complete (or None)."""
        out = []
        self.first_response_at = None
        deadline = time.monotonic() + first_timeout
        while True:
            r = self.read_response(max(0.0, deadline - time.monotonic()))
            if r is None:
                break
            out.append(r)
            if r.status < 200:
                continue
            if self.first_response_at is None:
                self.first_response_at = time.monotonic()
            # anything more must start arriving within `settle` seconds
            if not self.buf and not self._fill(time.monotonic() + settle):
                break
            deadline = time.monotonic() + settle
        return out, self.buf

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class RawServer:
    """A threaded TCP server on 127.0.0.1:0 for origins that answer with exact bytes.
    Subclasses set their own state, then call RawServer.__init__, and implement
    _serve(sock, idx) (idx: 0-based accept index); _accepted(idx) runs under the lock
    before the connection is served."""

    def __init__(self, name):
        self.lock = threading.Lock()
        self.accepted = 0
        self._conns = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept_loop, daemon=True, name=name).start()

    def _accepted(self, idx):
        pass

    def _accept_loop(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                idx = self.accepted
                self.accepted += 1
                self._accepted(idx)
                self._conns.append(s)
            threading.Thread(target=self._serve, args=(s, idx), daemon=True).start()

    def stop(self):
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.close()
            except OSError:
                pass


def recv_until(s, buf, done):
    """Receives on `s` into `buf` until done(buf): the bytes, or None if the peer closed first."""
    while not done(buf):
        d = s.recv(65536)
        if not d:
            return None
        buf += d
    return buf


def recv_head(s, buf):
    """A whole message head from `s` (what `buf` already holds first): (head, the bytes
    after it), or None if the peer closed first."""
    buf = recv_until(s, buf, lambda b: b"\r\n\r\n" in b)
    if buf is None:
        return None
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def overlap_peak(records):
    """Max number of request records (start, end; end None = still open) overlapping."""
    ev = []
    for r in records:
        ev.append((r["start"], 1))
        ev.append((r["end"] if r["end"] is not None else float("inf"), -1))
    cur = peak = 0
    for _, d in sorted(ev, key=lambda e: (e[0], e[1])):
        cur += d
        peak = max(peak, cur)
    return peak


def promtool_check(text):
    """`promtool check metrics` on a /metrics text: fails the test with promtool's words."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=20)
    out = r.stdout.decode("utf-8", "replace")
    log("promtool exit %d %s" % (r.returncode, out.strip()))
    check(r.returncode == 0, "promtool check metrics failed:\n%s" % out)


def chromium(workdir, *args, timeout=60, env=None):
    """Runs headless Chromium (Debian's `chromium`) with `args`, in a process group of its
    own that is killed whole on timeout; its profile lives in `workdir`. Returns stdout."""
    cmd = ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--user-data-dir=" + os.path.join(workdir, "chromium"), *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise TestFailure("chromium did not finish within %ds: %s" % (timeout, " ".join(cmd)))
    check(p.returncode == 0, "chromium exited %d: %s" % (p.returncode, err.decode(errors="replace")[-2000:]))
    return out.decode(errors="replace")


def free_port():
    """A loopback port with nothing listening: bind, read the number, close."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def raw_get(port, host, origin_port, path="/", extra_headers="", connection="close"):
    """Bytes of an absolute-form GET for the proxy."""
    return ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n%sConnection: %s\r\n\r\n"
            % (host, origin_port, path, host, origin_port, extra_headers, connection)
            ).encode()


def check_peak_across(origin, hosts, count, bound, what):
    """The origin saw `count` requests for `hosts` together, and `bound` of them at once
    at the most (and at some moment)."""
    seen = [r for h in hosts for r in origin.host(h)["requests"]]
    check(len(seen) == count, "%s: the origin saw %d requests, sent %d" % (what, len(seen), count))
    check(overlap_peak(seen) == bound, "%s: %d requests at the origin at once, bound %d"
          % (what, overlap_peak(seen), bound))


def check_tunnel_holds_slot(proxy, host, port, gate_key):
    """A CONNECT to host:port holds one slot of the gate `gate_key` while it is open."""
    s = connect_tunnel(proxy, host, port)
    try:
        check(wait_until(lambda: proxy.hosts().get(gate_key, {}).get("in_flight") == 1, 3.0),
              "the tunnel to %s does not hold a slot of %s: %s" % (host, gate_key, proxy.hosts().get(gate_key)))
    finally:
        s.close()


def connect_tunnel(proxy, host, port, timeout=10):
    """A socket to the proxy on which CONNECT host:port was answered 200 (read to the end
    of the answer, nothing more)."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            s.close()
            raise TestFailure("CONNECT %s:%d: closed after %r" % (host, port, head))
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        s.close()
        raise TestFailure("CONNECT %s:%d answered %r" % (host, port, head))
    return s


# --------------------------------------------------------------------------------------
# polling
# --------------------------------------------------------------------------------------
def https_session(proxy, cafile):
    """A requests session that sends HTTPS through `proxy` and trusts `cafile` alone."""
    import requests
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE in the environment would replace `verify`
    s.proxies = {"https": "http://127.0.0.1:%d" % proxy.port}
    s.verify = cafile
    return s


def wait_until(pred, timeout, interval=0.02, what="condition"):
    """Poll pred() until it returns a truthy value; return it (or the last value)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            return last
        time.sleep(interval)


# --------------------------------------------------------------------------------------
# the per-test context and runner
# --------------------------------------------------------------------------------------
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


class TestContext:
    def __init__(self, binary, verbose=False):
        self.binary = binary
        self.verbose = verbose
        self._tmp = tempfile.TemporaryDirectory(prefix="pp-it-")
        self.workdir = self._tmp.name
        self.proxies = []
        self.origins = []
        self.stores = []
        self._cert = None

    def origin(self, tls=False, address="127.0.0.1"):
        kw = {}
        if tls:
            kw["certfile"], kw["keyfile"] = self.cert()
        o = Origin(tls=tls, verbose=self.verbose, address=address, **kw).start()
        self.origins.append(o)
        log("origin%s on %s:%d" % (" (TLS)" if tls else "", address, o.port))
        return o

    def redis(self):
        """A redis-server of this test's own (see redis_store.py), started."""
        from redis_store import RedisStore
        store = RedisStore(self.workdir)
        self.stores.append(store)
        return store.start()

    def prometheus(self, targets):
        """A Prometheus of this test's own (see prometheus_server.py) scraping `targets`, started."""
        from prometheus_server import PrometheusServer
        prom = PrometheusServer(self.workdir, targets)
        self.stores.append(prom)  # every helper server with a stop(), stopped at cleanup
        return prom.start()

    def cert(self):
        if self._cert is None:
            self._cert = make_cert(self.workdir, "tls.test")
        return self._cert

    def proxy(self, config, name=None, extra_args=()):
        name = name or "proxy%d" % (len(self.proxies) + 1)
        p = Proxy(self.binary, config, self.workdir, name, extra_args)
        self.proxies.append(p)
        return p.start()

    def gen_ca(self):
        """`politeproxy --gen-ca` into the work directory: (ca.pem, ca.key) paths."""
        d = os.path.join(self.workdir, "ca")
        os.mkdir(d)
        r = subprocess.run([self.binary, "--gen-ca", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=20, preexec_fn=_pdeathsig)
        check(r.returncode == 0, "--gen-ca: %s" % r.stderr)
        return os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")

    def check_config(self, config, name="check"):
        """Run --check-config on a config (dict or YAML text).
        Returns (exit code, stdout, stderr, path, text)."""
        path = os.path.join(self.workdir, "%s.yaml" % name)
        text = config if isinstance(config, str) else dump_config(config)
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([self.binary, "--check-config", path], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20,
                           preexec_fn=_pdeathsig)
        return (r.returncode, r.stdout.decode("utf-8", "replace"),
                r.stderr.decode("utf-8", "replace"), path, text)

    def dump_proxy_output(self):
        for p in self.proxies:
            state = "running" if p.alive() else "exit code %s" % (
                p.proc.returncode if p.proc else "n/a")
            print("---- %s (pid %s, %s) output tail ----" % (p.name, p.pid, state))
            print(p.tail(80))
        sys.stdout.flush()

    def cleanup(self):
        for p in self.proxies:
            try:
                p.stop()
            except Exception as e:  # noqa: BLE001
                log("stopping %s: %s" % (p.name, e))
                p.kill_now()
        for o in self.origins:
            try:
                o.stop()
            except Exception:  # noqa: BLE001
                pass
        for s in self.stores:
            s.stop()
        self._tmp.cleanup()


def find_binary(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", default=os.environ.get("POLITEPROXY_BIN"),
                    help="path of the politeproxy binary (default: $POLITEPROXY_BIN)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    if not a.proxy:
        print("FAIL: no proxy binary: pass --proxy PATH or set POLITEPROXY_BIN",
              file=sys.stderr)
        sys.exit(2)
    if not (os.path.isfile(a.proxy) and os.access(a.proxy, os.X_OK)):
        print("FAIL: proxy binary %r does not exist or is not executable" % a.proxy,
              file=sys.stderr)
        sys.exit(2)
    return os.path.abspath(a.proxy), a.verbose


def main(test_fn, timeout=45, argv=None):
    """Run test_fn(TestContext) with a hard timeout; exit 0 on success, 1 on failure,
    3 on timeout. Every proxy started is stopped (by PID) whatever happens."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    binary, verbose = find_binary(sys.argv[1:] if argv is None else argv)
    timeout *= SLOW
    ctx = TestContext(binary, verbose)

    def on_timeout():
        print("FAIL %s: hard timeout: still running after %ss" % (name, timeout),
              flush=True)
        try:
            print("".join(traceback.format_stack(sys._current_frames()[main_ident])),
                  flush=True)
        except Exception:  # noqa: BLE001
            pass
        ctx.dump_proxy_output()
        _kill_all_live()
        shutil.rmtree(ctx.workdir, ignore_errors=True)
        os._exit(3)

    def on_signal(signum, _frame):
        print("FAIL %s: killed by signal %d" % (name, signum), flush=True)
        ctx.dump_proxy_output()
        _kill_all_live()
        shutil.rmtree(ctx.workdir, ignore_errors=True)
        os._exit(4)

    main_ident = threading.get_ident()
    watchdog = threading.Timer(timeout, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = 1
    t0 = time.monotonic()
    try:
        test_fn(ctx)
        rc = 0
    except AssertionError as e:
        print("FAIL %s: %s" % (name, e), flush=True)
        ctx.dump_proxy_output()
    except Exception:  # noqa: BLE001
        print("FAIL %s: unexpected error:\n%s" % (name, traceback.format_exc()), flush=True)
        ctx.dump_proxy_output()
    finally:
        try:
            ctx.cleanup()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            _kill_all_live()
        watchdog.cancel()
    if rc == 0:
        print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
    sys.exit(rc)
