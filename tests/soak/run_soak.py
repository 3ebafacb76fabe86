#!/usr/bin/python3
"""Soak test for politeproxy (not part of ctest).

    /usr/bin/python3 tests/soak/run_soak.py --proxy build/politeproxy [--minutes 10]

Runs the real proxy for --minutes (default 10, at most 10) against loopback origins
while a bounded pool of client threads sends a mix of well-behaved and misbehaving
traffic, reloads the configuration every ~20 s (now and then with an invalid file), and
samples the proxy's RSS and open descriptors every ~5 s. At the end it stops the
clients, lets the proxy settle (up to 15 s) and checks that nothing leaked: no slot or
parked request left in any host, descriptors back to the baseline, RSS flat after
warm-up, every request answered exactly once. Exit 0 on pass, 1 on fail (3 when the
hard time limit, --minutes + 1 minute, is hit). See tests/soak/README.md.

It reuses tests/integration/harness.py (Proxy, TestContext, base_config, metrics
parsing) and origin.py (Origin); the raw fault origin and the echo server are here.
"""

import argparse
import collections
import email.utils
import hashlib
import json
import os
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "integration"))
import harness as H  # noqa: E402

# --------------------------------------------------------------------------------------
# fixed parameters (the README documents them)
# --------------------------------------------------------------------------------------
MAX_MINUTES = 10.0
TEARDOWN_BUDGET = 60.0        # hard limit = --minutes + this
SAMPLE_EVERY = 5.0
RELOAD_EVERY = 20.0
SETTLE_MAX = 15.0
FD_SLACK = 4                  # see the README: lazily created, long-lived descriptors
RSS_BOUND_FRACTION = 0.10     # RSS growth bound: max(10 %, 5 MiB)
RSS_BOUND_KIB = 5 * 1024
CLIENT_MAX = 40
SCENARIO_BUDGET = 25.0        # one scenario (one connection) never runs longer
IDLE = 3.0                    # timeouts.idle (seconds) in the proxy config
RESPONSE_HEADERS = 2.0        # timeouts.response_headers
MAX_WAIT = 8.0                # queue.max_wait

N_HOSTS = 20
HOSTS = ["h%02d.test" % i for i in range(N_HOSTS)]
HEALTHY = HOSTS[:14]          # only normal traffic is aimed at these
THROTTLED = HOSTS[14:17]      # also get 429/503 (+ Retry-After) from the origin
FAULTY = HOSTS[17:]           # also get the raw fault origin's answers
N_EPHEMERAL = 300             # eNNN.test: gates created and evicted (host_idle_ttl 15s)
HOST_IDLE_TTL = "15s"

PATTERN = b"0123456789abcdef"


def pattern(n):
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


# --------------------------------------------------------------------------------------
# proxy configuration
# --------------------------------------------------------------------------------------
def make_config(echo_port, concurrency=2, rate=50, burst=20, max_wait=MAX_WAIT,
                overrides=None):
    cfg = H.base_config(
        hosts=overrides or {},
        concurrency=concurrency, rate=rate, burst=burst,
        queue={"max_waiting": 40, "max_wait": "%gs" % max_wait},
        timeouts={"connect": "2s", "response_headers": "%gs" % RESPONSE_HEADERS,
                  "idle": "%gs" % IDLE},
        adaptive={"enabled": True, "hard_max": 4, "grow_interval": "5s"},
        backoff={"initial": "200ms", "max": "2s", "forgive_after": "10s", "jitter": 0},
        retry_after_cap="2s")
    cfg["limits"] = {"host_idle_ttl": HOST_IDLE_TTL}
    cfg["security"]["connect_ports"] = [443, echo_port]
    return cfg


VALID_VARIANTS = [
    dict(concurrency=3, rate=80, burst=20),
    dict(concurrency=2, rate=40, burst=10, max_wait=6.0),
    dict(concurrency=2, rate=60, burst=20,
         overrides={"h05.test": {"concurrency": 1}}),
    dict(concurrency=3, rate=50, burst=30,
         overrides={"h06.test": {"concurrency": 4, "rate": 100,
                                 "reason": "soak test: raised on purpose"}}),
    dict(concurrency=2, rate=50, burst=20),
]


def invalid_config_text(echo_port, n):
    """n-th invalid file: each is rejected by the loader for a different reason."""
    kind = n % 5
    cfg = make_config(echo_port)
    if kind == 0:
        cfg["defaults"]["no_such_key"] = 7
    elif kind == 1:
        cfg["defaults"]["concurrency"] = 0
    elif kind == 2:
        cfg["defaults"]["timeouts"]["idle"] = "5"          # a duration without unit
    elif kind == 3:
        return "defaults: [unclosed\n  concurrency: 2\n", "YAML syntax error"
    else:
        cfg["hosts"] = {"h06.test": {"concurrency": 9}}    # raised without a reason
    return H.dump_config(cfg), ["unknown key", "concurrency 0", "duration without unit",
                                "YAML syntax error", "raise without reason"][kind]


# --------------------------------------------------------------------------------------
# origins of our own: faults origin.py cannot do, and a TCP echo for tunnels
# --------------------------------------------------------------------------------------
class _PrunedServer(H.RawServer):
    """harness.RawServer that forgets each connection when it is done (RawServer keeps
    them all, which a 10-minute run would turn into a slow leak of our own)."""

    def __init__(self, name, stop_event):
        self.stop_event = stop_event
        H.RawServer.__init__(self, name)

    def _serve(self, s, idx):
        try:
            self._serve_conn(s)
        except OSError:
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass
            with self.lock:
                try:
                    self._conns.remove(s)
                except ValueError:
                    pass


def _rst_close(s):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class FaultOrigin(_PrunedServer):
    """Keep-alive HTTP/1.1 origin whose answer is chosen by the path:
      /ok            200, 2 bytes
      /reset_mid     200 with Content-Length 100000, 10000 bytes, then RST
      /reset_before  RST right after reading the request (no byte sent)
      /close         FIN right after reading the request (no byte sent)
      /garbage       bytes that are not HTTP, then wait for the proxy to close
      /hang          never answers; waits (at most 8 s) for the proxy to give up"""

    def __init__(self, stop_event):
        self.counts = collections.Counter()
        _PrunedServer.__init__(self, "soak-fault-origin", stop_event)

    def _serve_conn(self, s):
        s.settimeout(10)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, _, buf = buf.partition(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            path = parts[1].split("?")[0] if len(parts) > 1 else "/"
            with self.lock:
                self.counts[path] += 1
            if path == "/reset_mid":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                          b"Content-Length: 100000\r\n\r\n" + pattern(10000))
                time.sleep(0.02)
                _rst_close(s)
                return
            if path == "/reset_before":
                _rst_close(s)
                return
            if path == "/close":
                return
            if path == "/garbage":
                s.sendall(b"SSH-2.0-OpenSSH_9.2 \x00\x01\x02 certainly not HTTP\r\n\r\n")
                self._wait_peer_close(s, 4.0)
                return
            if path == "/hang":
                self._wait_peer_close(s, RESPONSE_HEADERS + 6.0)
                return
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      b"Content-Length: 2\r\n\r\nok")

    @staticmethod
    def _wait_peer_close(s, limit):
        s.settimeout(limit)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass


class EchoServer(_PrunedServer):
    """TCP echo: what arrives goes back; EOF from the peer closes the connection."""

    def __init__(self, stop_event):
        _PrunedServer.__init__(self, "soak-echo", stop_event)

    def _serve_conn(self, s):
        s.settimeout(20)
        while True:
            d = s.recv(65536)
            if not d:
                return
            s.sendall(d)


# --------------------------------------------------------------------------------------
# a small raw HTTP/1.1 client with one absolute deadline per connection
# --------------------------------------------------------------------------------------
class ConnError(Exception):
    """kind: timeout | eof (closed before any byte of a response) | reset |
    truncated (part of a response, then EOF/reset) | malformed | send"""

    def __init__(self, kind, detail="", resp=None, got=0):
        Exception.__init__(self, "%s%s" % (kind, (": " + detail) if detail else ""))
        self.kind, self.detail, self.resp, self.got = kind, detail, resp, got


class Resp:
    def __init__(self, status, reason, headers):
        self.status, self.reason, self.headers = status, reason, headers
        self.hd = {}
        for k, v in headers:
            self.hd[k.lower()] = v
        self.body = b""
        ps = self.hd.get("proxy-status", "")
        m = re.search(r"error=([A-Za-z0-9_]+)", ps)
        self.proxy_error = m.group(1) if m else None

    @property
    def label(self):
        """'200' for an origin's answer, '503:connection_limit_reached' for the proxy's."""
        return "%d:%s" % (self.status, self.proxy_error) if self.proxy_error else str(self.status)

    def __repr__(self):
        return "<Resp %s %d bytes>" % (self.label, len(self.body))


class Client:
    def __init__(self, port, deadline):
        self.deadline = deadline
        self.buf = b""
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=max(0.2, self.remaining()))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def remaining(self):
        return self.deadline - time.monotonic()

    def send(self, data):
        rem = self.remaining()
        if rem <= 0:
            raise ConnError("timeout", "deadline before send")
        self.sock.settimeout(rem)
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise ConnError("timeout", "send")
        except OSError as e:
            raise ConnError("send", "%s: %s" % (type(e).__name__, e))

    def _recv(self, limit=None):
        """More bytes into buf; False at EOF. Raises ConnError(timeout|reset)."""
        rem = self.remaining() if limit is None else min(limit, self.remaining())
        if rem <= 0:
            raise ConnError("timeout")
        self.sock.settimeout(rem)
        try:
            d = self.sock.recv(262144)
        except socket.timeout:
            raise ConnError("timeout")
        except OSError as e:
            raise ConnError("reset", "%s: %s" % (type(e).__name__, e))
        if not d:
            return False
        self.buf += d
        return True

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            try:
                more = self._recv()
            except ConnError as e:
                if e.kind == "reset" and self.buf:
                    raise ConnError("truncated", "reset in response head")
                raise
            if not more:
                if self.buf:
                    raise ConnError("truncated", "EOF in response head (%r)" % self.buf[:60])
                raise ConnError("eof", "closed before any response byte")
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ?(.*)$", lines[0])
        if not m:
            raise ConnError("malformed", "status line %r" % lines[0][:80])
        headers = []
        for l in lines[1:]:
            k, sep, v = l.partition(":")
            if not sep:
                raise ConnError("malformed", "header line %r" % l[:80])
            headers.append((k.strip(), v.strip()))
        return Resp(int(m.group(1)), m.group(2), headers)

    def read_body(self, resp, method, limit=None):
        """Reads resp's body into resp.body (at most `limit` bytes when given, then
        returns early). Raises ConnError('truncated', resp=resp) when it ends early."""
        st = resp.status
        if method == "HEAD" or st in (204, 304) or 100 <= st < 200 or (
                method == "CONNECT" and 200 <= st < 300):
            return resp
        te = resp.hd.get("transfer-encoding", "").lower()

        def need(n):
            while len(self.buf) < n:
                try:
                    more = self._recv()
                except ConnError as e:
                    if e.kind == "reset":
                        raise ConnError("truncated", "reset after %d body bytes"
                                        % len(resp.body), resp=resp, got=len(resp.body))
                    raise
                if not more:
                    raise ConnError("truncated", "EOF after %d body bytes" % len(resp.body),
                                    resp=resp, got=len(resp.body))

        if "chunked" in te:
            while True:
                while b"\r\n" not in self.buf:
                    need(len(self.buf) + 1)
                line, _, self.buf = self.buf.partition(b"\r\n")
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise ConnError("malformed", "chunk size %r" % line[:40], resp=resp)
                if size == 0:
                    while True:  # trailers, then the empty line
                        while b"\r\n" not in self.buf:
                            need(len(self.buf) + 1)
                        tl, _, self.buf = self.buf.partition(b"\r\n")
                        if not tl:
                            return resp
                need(size + 2)
                resp.body += self.buf[:size]
                if self.buf[size:size + 2] != b"\r\n":
                    raise ConnError("malformed", "no CRLF after chunk", resp=resp)
                self.buf = self.buf[size + 2:]
                if limit is not None and len(resp.body) >= limit:
                    return resp
        elif "content-length" in resp.hd:
            n = int(resp.hd["content-length"])
            while len(resp.body) + len(self.buf) < n:
                if limit is not None and len(resp.body) + len(self.buf) >= limit:
                    break
                if len(self.buf) > 1 << 20:  # move big bodies out of the buffer
                    resp.body += self.buf
                    self.buf = b""
                try:
                    more = self._recv()
                except ConnError as e:
                    if e.kind != "reset":
                        raise
                    more = None
                if not more:
                    got = len(resp.body) + len(self.buf)
                    resp.body += self.buf
                    self.buf = b""
                    raise ConnError("truncated", "%s after %d of %d body bytes"
                                    % ("reset" if more is None else "EOF", got, n),
                                    resp=resp, got=got)
            take = n - len(resp.body)
            resp.body += self.buf[:take]
            self.buf = self.buf[take:]
        else:  # delimited by close
            resp.close_delimited = True
            while True:
                try:
                    more = self._recv()
                except ConnError as e:
                    if e.kind == "reset":
                        break
                    raise
                if not more:
                    break
            resp.body += self.buf
            self.buf = b""
        return resp

    def read_response(self, method="GET"):
        """One response (a 1xx too). ConnError on anything else."""
        resp = self.read_head()
        return self.read_body(resp, method)

    def read_final(self, method="GET"):
        """Skip 1xx; return (final response, number of 1xx seen)."""
        n1 = 0
        while True:
            r = self.read_response(method)
            if r.status >= 200:
                return r, n1
            n1 += 1

    def read_exact(self, n):
        while len(self.buf) < n:
            if not self._recv():
                raise ConnError("truncated", "EOF after %d of %d bytes" % (len(self.buf), n))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def wait_eof(self, limit):
        """After a final exchange: 'eof', 'reset', 'open' (nothing within limit), or
        'data' (bytes that belong to no request)."""
        if self.buf:
            return "data"
        try:
            more = self._recv(limit)
        except ConnError as e:
            return "open" if e.kind == "timeout" else "reset"
        return "data" if more else "eof"

    def close(self, rst=False):
        if rst:
            _rst_close(self.sock)
        try:
            self.sock.close()
        except OSError:
            pass


def stray_kind(method):
    if method == "HEAD":
        return "a body after a HEAD response (RFC 9110 9.3.2)"
    return "bytes after the response (more than one response?)"


def req_head(method, host, port, path, headers=(), conn="close"):
    lines = ["%s http://%s:%d%s HTTP/1.1" % (method, host, port, path),
             "Host: %s:%d" % (host, port)]
    lines += ["%s: %s" % kv for kv in headers]
    if conn:
        lines.append("Connection: %s" % conn)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(body, rng):
    out, pos = [], 0
    while pos < len(body):
        n = min(len(body) - pos, rng.choice([1, 7, 100, 1000, 4096, 16384, 65536]))
        out.append(b"%x\r\n" % n + body[pos:pos + n] + b"\r\n")
        pos += n
    out.append(b"0\r\n\r\n")
    return b"".join(out)


# --------------------------------------------------------------------------------------
# bookkeeping
# --------------------------------------------------------------------------------------
class Tally:
    MAX_EXAMPLES = 12

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.by_label = collections.Counter()       # outcome label -> n
        self.by_scenario = collections.Counter()    # scenario -> n
        self.by_scn_label = collections.Counter()   # (scenario, label) -> n
        self.fails = collections.Counter()          # kind -> n
        self.fail_examples = collections.defaultdict(list)
        self.warns = collections.Counter()
        self.warn_examples = collections.defaultdict(list)
        self.scn_time = collections.Counter()       # scenario -> seconds spent
        self.scn_runs = collections.Counter()       # scenario -> runs

    def ran(self, name, seconds):
        with self.lock:
            self.scn_time[name] += seconds
            self.scn_runs[name] += 1

    def record(self, scenario, label, fail=None, warn=None, detail=""):
        with self.lock:
            self.requests += 1
            self.by_label[label] += 1
            self.by_scenario[scenario] += 1
            self.by_scn_label[(scenario, label)] += 1
            if fail:
                self._note(self.fails, self.fail_examples, fail, scenario, label, detail)
            if warn:
                self._note(self.warns, self.warn_examples, warn, scenario, label, detail)

    def note_fail(self, kind, detail):
        with self.lock:
            self._note(self.fails, self.fail_examples, kind, "-", "-", detail)

    def note_warn(self, kind, detail):
        with self.lock:
            self._note(self.warns, self.warn_examples, kind, "-", "-", detail)

    def _note(self, counter, examples, kind, scenario, label, detail):
        counter[kind] += 1
        if len(examples[kind]) < self.MAX_EXAMPLES:
            examples[kind].append("[t=%.1f] %s -> %s %s" % (
                time.monotonic() - T_LOAD[0], scenario, label, detail))

    def snapshot(self):
        with self.lock:
            return self.requests, collections.Counter(self.by_label)


T_LOAD = [time.monotonic()]  # set when the load starts


# --------------------------------------------------------------------------------------
# the scenarios: each opens its own connection(s), records every request it makes
# --------------------------------------------------------------------------------------
class Soak:
    def __init__(self, proxy, origin, faults, echo, tally, load_end, stop):
        self.proxy, self.origin, self.faults, self.echo = proxy, origin, faults, echo
        self.tally, self.load_end, self.stop = tally, load_end, stop
        self.eph_lock = threading.Lock()

    # -- helpers --------------------------------------------------------------------
    def pick_host(self, rng):
        return rng.choice(HEALTHY) if rng.random() < 0.9 else rng.choice(THROTTLED + FAULTY)

    def expected_ok(self, host, resp, extra=()):
        """Is this status what the host may answer? (unexpected ones are warnings)"""
        if resp.label in ("200",) + tuple(extra):
            return True
        if host not in HEALTHY and resp.label == "503:connection_limit_reached":
            return True  # a host paused by its own 429/503/faults: parked too long
        return False

    def check_body(self, resp, size=None, sent=None):
        """Integrity of an origin 200: None when fine, else a failure description."""
        if resp.proxy_error or resp.status != 200:
            return None
        if size is not None and resp.body != pattern(size):
            return "body of size=%d came back as %d bytes%s" % (
                size, len(resp.body), "" if len(resp.body) != size else " (content differs)")
        if sent is not None:
            try:
                j = json.loads(resp.body.decode())
            except ValueError:
                return "echo response not JSON: %r" % resp.body[:80]
            if j.get("length") != len(sent) or j.get("sha256") != hashlib.sha256(sent).hexdigest():
                return "origin received %s bytes (sha %s...), client sent %d" % (
                    j.get("length"), str(j.get("sha256"))[:12], len(sent))
        return None

    def finish_close(self, scn, c, resp, host, extra_ok=(), size=None, sent=None,
                     method="GET"):
        """Common end of a Connection: close exchange: judge, check nothing follows."""
        fail = warn = None
        detail = ""
        bad = self.check_body(resp, size=size, sent=sent)
        if bad:
            fail, detail = "corrupt body", bad
        after = c.wait_eof(2.0)
        if after == "data" and not fail:
            fail, detail = stray_kind(method), "%s %r" % (host, c.buf[:80])
        elif after == "open" and not fail:
            warn, detail = "connection open 2 s after a Connection: close response", resp.label
        if not fail and not warn and not self.expected_ok(host, resp, extra_ok):
            warn, detail = "unexpected status for %s" % scn, "%s %s" % (
                host, resp.hd.get("proxy-status", ""))
        if not fail and not warn and resp.proxy_error == "connection_limit_reached" and \
                "retry-after" not in resp.hd:
            warn, detail = "proxy 503 without Retry-After", host
        if not fail and not warn and not resp.proxy_error and "proxy-status" not in resp.hd:
            warn, detail = "origin response without Proxy-Status", resp.label
        self.tally.record(scn, resp.label, fail=fail, warn=warn, detail=detail)

    def conn_fail(self, scn, e, host):
        self.tally.record(scn, "conn-error:" + e.kind,
                          fail="connection error the client did not cause",
                          detail="%s: %s" % (host, e))

    def deadline(self):
        return min(time.monotonic() + SCENARIO_BUDGET, self.load_end + SCENARIO_BUDGET)

    # -- well-behaved -------------------------------------------------------------------
    def scn_get(self, rng, scn="get", delay=None):
        host = self.pick_host(rng)
        size = rng.choice([0, 10, 1000, 16384, 65536, 300000])
        q = "size=%d" % size
        if delay:
            q += "&delay=%.2f" % delay
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/%s?%s" % (scn, q)))
            resp = c.read_response("GET")
            self.finish_close(scn, c, resp, host, size=size)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_slow(self, rng):
        self.scn_get(rng, "slow", delay=rng.uniform(0.2, 1.0))

    def scn_slow_reader(self, rng):
        # a client that reads a big body slowly (pauses well under timeouts.idle): the
        # proxy must apply backpressure and deliver every byte
        host = rng.choice(HEALTHY)
        size = rng.choice([500000, 1500000])
        c = Client(self.proxy.port, self.deadline())
        try:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            c.send(req_head("GET", host, self.origin.port, "/slow_reader?size=%d" % size))
            resp = c.read_head()
            if resp.status == 200 and not resp.proxy_error:
                n = int(resp.hd.get("content-length", "-1"))
                while len(resp.body) + len(c.buf) < n:
                    resp.body += c.buf
                    c.buf = b""
                    time.sleep(rng.uniform(0.0, 0.05))
                    if not c._recv():
                        raise ConnError("truncated", "EOF after %d of %d body bytes"
                                        % (len(resp.body), n), resp=resp)
            c.read_body(resp, "GET")
            self.finish_close("slow_reader", c, resp, host, size=size)
        except ConnError as e:
            self.conn_fail("slow_reader", e, host)
        finally:
            c.close()

    def scn_head(self, rng):
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("HEAD", host, self.origin.port, "/head?size=1000"))
            resp = c.read_response("HEAD")
            if resp.status == 200 and not resp.proxy_error and \
                    resp.hd.get("content-length") != "1000":
                self.tally.record("head", resp.label, warn="HEAD lost its Content-Length",
                                  detail=repr(resp.headers))
                return
            self.finish_close("head", c, resp, host, method="HEAD")
        except ConnError as e:
            self.conn_fail("head", e, host)
        finally:
            c.close()

    def _upload(self, rng, scn, method, use_chunked, expect=False):
        host = self.pick_host(rng)
        body = os.urandom(rng.choice([0, 1, 100, 5000, 65536, 200000]))
        hdrs = [("Content-Type", "application/octet-stream")]
        if use_chunked:
            hdrs.append(("Transfer-Encoding", "chunked"))
            wire = chunked(body, rng)
        else:
            hdrs.append(("Content-Length", str(len(body))))
            wire = body
        if expect:
            hdrs.append(("Expect", "100-continue"))
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head(method, host, self.origin.port, "/%s" % scn, hdrs))
            if expect:
                resp = c.read_response(method)
                if resp.status == 100:
                    c.send(wire)
                    resp, _ = c.read_final(method)
                # else a final answer without 100: the body is not sent (RFC 9110 10.1.1)
                self.finish_close(scn, c, resp, host, sent=body if resp.status == 200 else None)
                return
            # send in a few pieces, now and then with a pause between them
            pieces = rng.choice([1, 1, 2, 3])
            step = max(1, len(wire) // pieces)
            send_err = None
            for i in range(0, len(wire), step):
                try:
                    c.send(wire[i:i + step])
                except ConnError as e:
                    send_err = e  # the proxy may have answered early; read it below
                    break
                if pieces > 1 and rng.random() < 0.3:
                    time.sleep(rng.uniform(0.01, 0.2))
            try:
                resp, _ = c.read_final(method)
            except ConnError as e:
                if send_err is not None:
                    e = ConnError(e.kind, "%s (sending the body failed first: %s)"
                                  % (e.detail, send_err.detail))
                raise e
            self.finish_close(scn, c, resp, host, sent=body)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_post_cl(self, rng):
        self._upload(rng, "post_cl", "POST", False)

    def scn_put_chunked(self, rng):
        self._upload(rng, "put_chunked", "PUT", True)

    def scn_expect100(self, rng):
        self._upload(rng, "expect100", "POST", rng.random() < 0.5, expect=True)

    def scn_keepalive(self, rng):
        host = self.pick_host(rng)
        n = rng.randint(2, 6)
        c = Client(self.proxy.port, self.deadline())
        try:
            for i in range(n):
                if i > 0 and c.remaining() < MAX_WAIT + RESPONSE_HEADERS + 5:
                    return  # our own time budget: we close the idle connection
                last = i == n - 1 or self.stop.is_set()
                kind = rng.choice(["get", "get", "head", "post"])
                conn = "close" if last else "keep-alive"
                size = sent = None
                if kind == "get":
                    size = rng.choice([0, 100, 5000, 70000])
                    c.send(req_head("GET", host, self.origin.port,
                                    "/ka%d?size=%d" % (i, size), conn=conn))
                    method = "GET"
                elif kind == "head":
                    c.send(req_head("HEAD", host, self.origin.port, "/ka%d?size=10" % i,
                                    conn=conn))
                    method = "HEAD"
                else:
                    sent = os.urandom(rng.choice([0, 10, 3000, 40000]))
                    if rng.random() < 0.5:
                        c.send(req_head("POST", host, self.origin.port, "/ka%d" % i,
                                        [("Content-Length", str(len(sent)))], conn=conn) + sent)
                    else:
                        c.send(req_head("POST", host, self.origin.port, "/ka%d" % i,
                                        [("Transfer-Encoding", "chunked")], conn=conn)
                               + chunked(sent, rng))
                    method = "POST"
                resp, _ = c.read_final(method)
                closing = last or "close" in resp.hd.get("connection", "").lower()
                if closing:
                    self.finish_close("keepalive", c, resp, host, size=size, sent=sent,
                                      method=method)
                    return
                if c.buf:
                    # nothing was pipelined: these bytes belong to no request, and the
                    # next response would be read from them
                    self.tally.record("keepalive", resp.label, fail=stray_kind(method),
                                      detail="%s %r" % (host, c.buf[:80]))
                    return
                bad = self.check_body(resp, size=size, sent=sent)
                warn = None if self.expected_ok(host, resp) else "unexpected status for keepalive"
                self.tally.record("keepalive", resp.label,
                                  fail="corrupt body" if bad else None, warn=warn,
                                  detail=bad or host)
                gap = rng.random()
                if gap < 0.07:
                    # idle past timeouts.idle: the proxy must close the connection
                    time.sleep(IDLE + 1.5)
                    after = c.wait_eof(2.0)
                    if after in ("eof", "reset"):
                        self.tally.record("keepalive", "idle-closed-by-proxy")
                    else:
                        self.tally.record("keepalive", "idle-not-closed",
                                          warn="kept-alive client connection still open %.1f s"
                                          " after its last response (timeouts.idle %gs)"
                                          % (IDLE + 3.5, IDLE), detail=after)
                    return
                if gap < 0.4:
                    time.sleep(rng.uniform(0.01, 1.0))
        except ConnError as e:
            self.conn_fail("keepalive", e, host)
        finally:
            c.close()

    def scn_throttle(self, rng):
        host = rng.choice(THROTTLED)
        status = rng.choice([429, 503])
        ra = rng.choice([None, "1", "0", "date"])
        q = "status=%d" % status
        if ra == "date":
            q += "&retry_after=" + email.utils.formatdate(time.time() + 1, usegmt=True
                                                          ).replace(" ", "%20").replace(",", "%2C")
        elif ra is not None:
            q += "&retry_after=" + ra
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/throttle?" + q))
            resp = c.read_response("GET")
            self.finish_close("throttle", c, resp, host, extra_ok=(str(status),))
        except ConnError as e:
            self.conn_fail("throttle", e, host)
        finally:
            c.close()

    def scn_fault(self, rng):
        host = rng.choice(FAULTY)
        path = rng.choice(["/ok", "/reset_mid", "/reset_before", "/close", "/garbage",
                           "/hang"])
        scn = "fault" + path.replace("/", ":")
        expect = {"/ok": ("200",),
                  "/reset_mid": ("200",),
                  "/reset_before": ("502:connection_terminated", "502:connection_refused"),
                  "/close": ("502:connection_terminated",),
                  "/garbage": ("502:http_protocol_error",),
                  "/hang": ("504:http_response_timeout",)}[path]
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.faults.port, path))
            try:
                resp = c.read_response("GET")
            except ConnError as e:
                if path == "/reset_mid" and e.kind == "truncated" and e.resp is not None \
                        and e.resp.status == 200 and e.got < 100000:
                    # the header went out before the origin's reset: a truncated body
                    # and a closed connection is all a proxy can do
                    self.tally.record(scn, "200-truncated(origin reset)")
                    return
                raise
            if path == "/reset_mid" and resp.label == "200":
                self.tally.record(scn, resp.label, fail="whole body from an origin that"
                                  " sent 10000 of 100000 bytes", detail=host)
                return
            self.finish_close(scn, c, resp, host, extra_ok=expect)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_ephemeral(self, rng):
        host = "e%03d.test" % rng.randrange(N_EPHEMERAL)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/eph?size=100"))
            resp = c.read_response("GET")
            self.finish_close("ephemeral", c, resp, HEALTHY[0], size=100)
        except ConnError as e:
            self.conn_fail("ephemeral", e, host)
        finally:
            c.close()

    # -- clients that give up -------------------------------------------------------
    def _aborted(self, scn, c, rng, note="aborted"):
        """Close as planned; if the proxy had already answered, say so (that is fine)."""
        c.close(rst=rng.random() < 0.4)
        self.tally.record(scn, note)

    def scn_abort_header(self, rng):
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            v = rng.random()
            if v < 0.4:   # POST header sent, then nothing: the body never comes
                c.send(req_head("POST", host, self.origin.port, "/abort_header",
                                [("Content-Length", "100000")]))
                time.sleep(rng.uniform(0, 0.5))
            elif v < 0.7:  # part of the header section only
                h = req_head("GET", host, self.origin.port, "/abort_partial?size=10")
                c.send(h[:rng.randint(1, len(h) - 2)])
                time.sleep(rng.uniform(0, 0.3))
            else:          # a complete GET, closed at once
                c.send(req_head("GET", host, self.origin.port, "/abort_now?delay=0.3"))
                time.sleep(rng.uniform(0, 0.05))
            self._aborted("abort_header", c, rng)
        except ConnError as e:
            c.close()
            self.conn_fail("abort_header", e, host)

    def scn_abort_body(self, rng):
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            n = rng.choice([100000, 500000, 1000000])
            body = os.urandom(n)
            if rng.random() < 0.5:
                c.send(req_head("POST", host, self.origin.port, "/abort_body",
                                [("Content-Length", str(n))]))
                wire = body
            else:
                c.send(req_head("PUT", host, self.origin.port, "/abort_body_chunked",
                                [("Transfer-Encoding", "chunked")]))
                wire = chunked(body, rng)
            cut = rng.randint(1, len(wire) - 10)
            step = max(1, cut // rng.randint(1, 4))
            for i in range(0, cut, step):
                c.send(wire[i:min(cut, i + step)])
                time.sleep(rng.uniform(0, 0.1))
            self._aborted("abort_body", c, rng)
        except ConnError as e:
            c.close()
            if e.kind in ("send", "timeout"):
                # the proxy may stop reading a parked upload (its buffers are full) or
                # answer 503 and close; either way the client is giving up anyway
                self.tally.record("abort_body", "aborted(send blocked/failed)")
            else:
                self.conn_fail("abort_body", e, host)

    def scn_abort_parked(self, rng):
        # a slow request, given up after a random time: parked, in flight or done
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port,
                            "/abort_parked?delay=%.2f" % rng.uniform(0.5, 1.5)))
            time.sleep(rng.uniform(0.05, 2.5))
            self._aborted("abort_parked", c, rng)
        except ConnError as e:
            c.close()
            self.conn_fail("abort_parked", e, host)

    def scn_abort_response(self, rng):
        host = self.pick_host(rng)
        size = rng.choice([1000000, 3000000])
        want = rng.choice([0, 1, 16384, 200000, 900000])
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/abort_response?size=%d" % size))
            resp = c.read_head()
            if resp.status != 200 or resp.proxy_error:
                c.read_body(resp, "GET")
                self.finish_close("abort_response", c, resp, host)
                return
            c.read_body(resp, "GET", limit=want)
            if len(resp.body) >= size:
                self.finish_close("abort_response", c, resp, host, size=size)
                return
            if resp.body != pattern(len(resp.body)):
                self.tally.record("abort_response", "aborted", fail="corrupt body",
                                  detail="first %d bytes differ" % len(resp.body))
                c.close()
                return
            self._aborted("abort_response", c, rng)
        except ConnError as e:
            c.close()
            self.conn_fail("abort_response", e, host)

    # -- tunnels ------------------------------------------------------------------------
    def scn_connect(self, rng):
        host = rng.choice(HEALTHY)
        variant = rng.choice(["abort_before_reply", "abort_after_reply", "echo_close",
                              "echo_close", "echo_halfclose", "echo_idle"])
        scn = "connect:" + variant
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                    % (host, self.echo.port, host, self.echo.port)).encode())
            if variant == "abort_before_reply":
                time.sleep(rng.uniform(0, 0.05))
                return self._aborted(scn, c, rng)
            resp = c.read_head()
            if resp.status != 200:
                c.read_body(resp, "GET")
                self.finish_close(scn, c, resp, host)
                return
            if c.buf:
                self.tally.record(scn, "200", fail="bytes after the CONNECT 200 before the"
                                  " origin said anything", detail=repr(c.buf[:60]))
                return
            if variant == "abort_after_reply":
                return self._aborted(scn, c, rng)
            for _ in range(rng.randint(1, 5)):
                data = os.urandom(rng.choice([1, 100, 4096, 65536, 200000]))
                c.send(data)
                back = c.read_exact(len(data))
                if back != data:
                    self.tally.record(scn, "200", fail="tunnel echo differs",
                                      detail="%d bytes" % len(data))
                    return
            if variant == "echo_close":
                if rng.random() < 0.5:
                    c.send(os.urandom(rng.choice([10, 50000])))  # in flight as we close
                return self._aborted(scn, c, rng, "closed-by-client")
            if variant == "echo_halfclose":
                c.sock.shutdown(socket.SHUT_WR)
                after = c.wait_eof(5.0)
                if after in ("eof", "reset"):
                    self.tally.record(scn, "half-closed, then closed")
                else:
                    self.tally.record(scn, "half-close-" + after,
                                      fail="tunnel did not close after the client's"
                                      " half-close and the origin's close", detail=after)
                return
            # echo_idle: no traffic; the proxy closes after timeouts.idle
            t0 = time.monotonic()
            after = c.wait_eof(IDLE + 3.0)
            took = time.monotonic() - t0
            if after in ("eof", "reset") and took >= IDLE - 0.3:
                self.tally.record(scn, "idle-closed-by-proxy")
            elif after in ("eof", "reset"):
                self.tally.record(scn, "closed-early", warn="tunnel closed %.2f s after the"
                                  " last traffic (timeouts.idle %gs)" % (took, IDLE))
            else:
                self.tally.record(scn, "idle-not-closed", fail="idle tunnel still open %.1f s"
                                  " after the last traffic (timeouts.idle %gs)" % (took, IDLE),
                                  detail=after)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_connect_denied(self, rng):
        host = rng.choice(HEALTHY)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(("CONNECT %s:25 HTTP/1.1\r\nHost: %s:25\r\n\r\n" % (host, host)).encode())
            resp = c.read_response("GET")
            self.finish_close("connect_denied", c, resp, host,
                              extra_ok=("403:http_request_denied",))
        except ConnError as e:
            self.conn_fail("connect_denied", e, host)
        finally:
            c.close()


SCENARIOS = [  # (name, weight)
    ("get", 30), ("slow", 6), ("slow_reader", 2), ("head", 5), ("post_cl", 7), ("put_chunked", 6),
    ("expect100", 2), ("keepalive", 10), ("throttle", 5), ("fault", 7), ("ephemeral", 3),
    ("abort_header", 4), ("abort_body", 3), ("abort_parked", 4), ("abort_response", 4),
    ("connect", 5), ("connect_denied", 1),
]


def client_loop(soak, idx, seed):
    rng = random.Random(seed * 1000 + idx)
    names = [n for n, _ in SCENARIOS]
    weights = [w for _, w in SCENARIOS]
    while not soak.stop.is_set() and time.monotonic() < soak.load_end:
        name = rng.choices(names, weights)[0]
        t0 = time.monotonic()
        try:
            getattr(soak, "scn_" + name)(rng)
        except ConnError as e:   # connect() to the proxy itself failed
            soak.tally.record(name, "conn-error:" + e.kind, fail="could not reach the proxy",
                              detail=str(e))
        except OSError as e:
            soak.tally.record(name, "conn-error:connect", fail="could not reach the proxy",
                              detail="%s: %s" % (type(e).__name__, e))
            time.sleep(0.2)
        except Exception:  # noqa: BLE001 - a bug of ours; counted, the loop goes on
            soak.tally.note_fail("soak client exception", traceback.format_exc()[-600:])
            time.sleep(0.2)
        soak.tally.ran(name, time.monotonic() - t0)
        # a little think time keeps the load steady instead of CPU-bound
        time.sleep(rng.uniform(0.0, 0.03))


# --------------------------------------------------------------------------------------
# proxy observation
# --------------------------------------------------------------------------------------
def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            p = f.read().rsplit(")", 1)[1].split()
        return (int(p[11]) + int(p[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def fd_table(pid):
    out = {}
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                pass
    except OSError:
        pass
    return out


TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def describe_sockets(inodes):
    """inode -> 'local -> remote STATE' from /proc/net/tcp (the proxy's net namespace
    is ours)."""
    out = {}
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                p = line.split()
                if p[9] in inodes:
                    lp = int(p[1].split(":")[1], 16)
                    rp = int(p[2].split(":")[1], 16)
                    out[p[9]] = ":%d -> :%d %s" % (lp, rp, TCP_STATES.get(p[3], p[3]))
    except OSError:
        pass
    return out


def hosts_json(proxy):
    status, _, body = proxy.admin_get("/hosts")
    H.check(status == 200, "GET /hosts answered %d" % status)
    return json.loads(body.decode())


def reload_counts(m):
    return (H.mget(m, "politeproxy_config_reloads_total", 0.0, result="success"),
            H.mget(m, "politeproxy_config_reloads_total", 0.0, result="failure"))


class Sample:
    __slots__ = ("t", "rss", "fds", "requests", "labels", "client_conns", "upstream",
                 "tunnels", "hosts")


def take_sample(proxy, tally, t):
    s = Sample()
    s.t = t
    s.rss = rss_kib(proxy.pid)
    s.fds = fd_count(proxy.pid)
    s.requests, s.labels = tally.snapshot()
    s.client_conns = s.upstream = s.tunnels = s.hosts = None
    try:
        m = proxy.metrics()
        s.client_conns = H.msum(m, "politeproxy_client_connections")
        s.upstream = H.mget(m, "politeproxy_upstream_connections", protocol="http1")
        s.tunnels = H.mget(m, "politeproxy_upstream_connections", protocol="tunnel")
        s.hosts = H.mget(m, "politeproxy_hosts_tracked")
    except Exception as e:  # noqa: BLE001
        tally.note_warn("admin /metrics failed during a sample", "%s: %s" % (type(e).__name__, e))
    return s


def status_classes(labels):
    c = collections.Counter()
    for lab, n in labels.items():
        if lab[:1].isdigit():
            c[lab[0] + "xx"] += n
        elif lab.startswith("conn-error"):
            c["err"] += n
        else:
            c["other"] += n
    return c


def fmt_mib(kib):
    return "-" if kib is None else "%.1f" % (kib / 1024.0)


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------
def parse_args(argv):
    ap = argparse.ArgumentParser(description="politeproxy soak test (see tests/soak/README.md)")
    ap.add_argument("--proxy", default=os.environ.get("POLITEPROXY_BIN"),
                    help="the politeproxy binary (default: $POLITEPROXY_BIN)")
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="length of the run, 0.5..10 (default 10); teardown adds <= 1 min")
    ap.add_argument("--clients", type=int, default=24,
                    help="client threads, 1..%d (default 24)" % CLIENT_MAX)
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    ap.add_argument("--samples-csv", default=None,
                    help="also write the 5-second samples to this CSV file")
    a = ap.parse_args(argv)
    if not a.proxy:
        ap.error("no proxy binary: pass --proxy PATH or set POLITEPROXY_BIN")
    if not (os.path.isfile(a.proxy) and os.access(a.proxy, os.X_OK)):
        ap.error("proxy binary %r does not exist or is not executable" % a.proxy)
    if not 0.5 <= a.minutes <= MAX_MINUTES:
        ap.error("--minutes must be between 0.5 and %g" % MAX_MINUTES)
    if not 1 <= a.clients <= CLIENT_MAX:
        ap.error("--clients must be between 1 and %d" % CLIENT_MAX)
    if a.seed is None:
        a.seed = int(time.time()) % 100000
    a.proxy = os.path.abspath(a.proxy)
    return a


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t_start = time.monotonic()
    hard_end = t_start + args.minutes * 60 + TEARDOWN_BUDGET
    ctx = H.TestContext(args.proxy)
    stop = threading.Event()

    def on_timeout():
        print("FAIL soak: hard time limit (%.1f min) reached; killing the proxy"
              % ((hard_end - t_start) / 60), flush=True)
        try:
            ctx.dump_proxy_output()
        except Exception:  # noqa: BLE001
            pass
        H._kill_all_live()
        os._exit(3)

    def on_signal(signum, _frame):
        print("FAIL soak: interrupted by signal %d" % signum, flush=True)
        H._kill_all_live()
        os._exit(4)

    watchdog = threading.Timer(hard_end - time.monotonic(), on_timeout)
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    tally = Tally()
    fails = []      # (check, message)
    checks = []     # (check, ok, text)
    samples = []
    reload_log = []
    info = {}
    proxy = None
    rc = 1
    try:
        origin = ctx.origin()
        faults = FaultOrigin(stop)
        echo = EchoServer(stop)
        H.log("fault origin on 127.0.0.1:%d, echo on 127.0.0.1:%d" % (faults.port, echo.port))
        cfg = make_config(echo.port)
        proxy = ctx.proxy(cfg, name="soak")   # from the main thread (PR_SET_PDEATHSIG)
        time.sleep(0.5)
        fd_base = fd_count(proxy.pid)
        fd_base_table = fd_table(proxy.pid)
        rss_first = rss_kib(proxy.pid)
        H.log("baseline: fds %d, RSS %s MiB" % (fd_base, fmt_mib(rss_first)))

        T_LOAD[0] = time.monotonic()
        load_end = t_start + args.minutes * 60
        load_len = load_end - T_LOAD[0]
        soak = Soak(proxy, origin, faults, echo, tally, load_end, stop)
        workers = [threading.Thread(target=client_loop, args=(soak, i, args.seed),
                                    daemon=True, name="client-%d" % i)
                   for i in range(args.clients)]
        for w in workers:
            w.start()
        H.log("load: %d client threads for %.0f s (seed %d)" % (args.clients, load_len,
                                                                args.seed))

        # -- the monitor: samples, reloads and the proxy's life, on this thread -------
        state = {"valid": 0, "invalid": 0, "n": 0, "conc": 2, "override5": False}
        origin_peaks = collections.Counter()
        next_sample = T_LOAD[0] + SAMPLE_EVERY
        next_reload = T_LOAD[0] + RELOAD_EVERY
        next_origin_reset = T_LOAD[0] + 60
        samples.append(take_sample(proxy, tally, 0.0))
        prev = samples[0]
        while time.monotonic() < load_end:
            if not proxy.alive():
                fails.append(("proxy alive", "the proxy died during the load (exit code %s)"
                              % proxy.proc.returncode))
                break
            now = time.monotonic()
            if now >= next_sample:
                next_sample += SAMPLE_EVERY
                s = take_sample(proxy, tally, now - T_LOAD[0])
                samples.append(s)
                cls = status_classes(s.labels)
                H.log("t=%4.0fs rss=%s MiB fds=%s req=%d (+%.0f/s) 2xx=%d 4xx=%d 5xx=%d "
                      "other=%d err=%d conns=%s up=%s tun=%s hosts=%s reloads=%d/%d"
                      % (s.t, fmt_mib(s.rss), s.fds, s.requests,
                         (s.requests - prev.requests) / max(0.001, s.t - prev.t),
                         cls["2xx"], cls["4xx"], cls["5xx"], cls["other"], cls["err"],
                         _i(s.client_conns), _i(s.upstream), _i(s.tunnels), _i(s.hosts),
                         state["valid"], state["invalid"]))
                prev = s
            if now >= next_origin_reset:
                next_origin_reset += 60
                for h, st in origin.stats().items():
                    origin_peaks[h] = max(origin_peaks[h], st["peak"])
                origin.reset()   # origin.py keeps per-request records; bound them
            if now >= next_reload and now < load_end - 5:
                next_reload += RELOAD_EVERY
                do_reload(proxy, echo, state, reload_log, fails)
            time.sleep(min(0.25, max(0.0, load_end - time.monotonic())))

        # -- teardown --------------------------------------------------------------------
        stop.set()
        t_stop = time.monotonic()
        join_end = t_stop + SCENARIO_BUDGET + 2
        for w in workers:
            w.join(max(0.0, join_end - time.monotonic()))
        stuck = [w.name for w in workers if w.is_alive()]
        if stuck:
            fails.append(("clients stopped", "%d client threads still running %.0f s after"
                          " the stop" % (len(stuck), time.monotonic() - t_stop)))
        H.log("clients stopped after %.1f s; settling (<= %.0f s)"
              % (time.monotonic() - t_stop, SETTLE_MAX))
        for h, st in origin.stats().items():
            origin_peaks[h] = max(origin_peaks[h], st["peak"])

        alive = proxy.alive()
        checks.append(("proxy alive all along", alive,
                       "running" if alive else "died, exit code %s" % proxy.proc.returncode))
        settle_t0 = time.monotonic()
        last = None
        if alive:
            while True:
                try:
                    last = settle_state(proxy)
                except Exception as e:  # noqa: BLE001
                    fails.append(("admin answers after the load", "%s: %s"
                                  % (type(e).__name__, e)))
                    last = None
                    break
                if last["quiet"] and last["fds"] <= fd_base:
                    break
                if time.monotonic() - settle_t0 >= SETTLE_MAX:
                    break
                time.sleep(0.5)
        info["settle"] = time.monotonic() - settle_t0
        end_sample = take_sample(proxy, tally, time.monotonic() - T_LOAD[0]) if alive else None
        info["load_len"] = t_stop - T_LOAD[0]

        # -- checks ----------------------------------------------------------------------
        if last is not None:
            busy = last["busy_hosts"]
            checks.append(("/hosts: in_flight == 0 and waiting == 0", not busy,
                           "%d hosts tracked, all idle" % last["n_hosts"] if not busy
                           else "not idle after %.0f s: %s" % (info["settle"], busy[:8])))
            checks.append(("host_in_flight / host_waiting gauges == 0", not last["busy_gauges"],
                           "all 0" if not last["busy_gauges"]
                           else "non-zero: %s" % last["busy_gauges"][:8]))
            fd_ok = last["fds"] <= fd_base + FD_SLACK
            extra = ""
            if not fd_ok:
                extra = "; new descriptors: " + describe_new_fds(proxy.pid, fd_base_table)
            checks.append(("fds back to baseline (+%d)" % FD_SLACK, fd_ok,
                           "baseline %d, end %d%s" % (fd_base, last["fds"], extra)))
            info["fd_end"] = last["fds"]
            info["fd_new"] = describe_new_fds(proxy.pid, fd_base_table)
        info["fd_base"] = fd_base
        info["fd_max"] = max([s.fds for s in samples if s.fds is not None] or [0])

        rss = rss_verdict(samples, info["load_len"])
        info["rss"] = rss
        if rss["ok"] is None:
            checks.append(("RSS flat after warm-up", True, "too few samples to judge: "
                           + rss["text"]))
        else:
            checks.append(("RSS flat after warm-up", rss["ok"], rss["text"]))

        # requests: exactly one response, or the client's own abort
        req_fails = sum(tally.fails.values())
        checks.append(("every request: one response or its own abort", req_fails == 0,
                       "%d requests, %d failures" % (tally.requests, req_fails)))
        checks.append(("requests were made", tally.requests > 0, "%d" % tally.requests))

        # reloads
        if alive:
            ok_n, fail_n = reload_counts(proxy.metrics())
            rl_ok = ok_n == state["valid"] and fail_n == state["invalid"] and state["n"] > 0
            checks.append(("config_reloads_total{result} matches the SIGHUPs sent", rl_ok,
                           "sent %d valid / %d invalid; counter success=%d failure=%d"
                           % (state["valid"], state["invalid"], ok_n, fail_n)))
            info["reloads"] = (state["valid"], state["invalid"], ok_n, fail_n)
        info["origin_peak"] = max(origin_peaks.values() or [0])
        if alive:
            try:
                info["hosts_end"] = [h for h in hosts_json(proxy) if h.get("key") in HOSTS]
                m = proxy.metrics()
                lc = collections.Counter()
                for labels, v in H.mseries(m, "politeproxy_limit_changes_total").items():
                    d = dict(labels)
                    grp = "healthy" if d.get("host") in HEALTHY else "others"
                    lc[(grp, d.get("direction"))] += v
                info["limit_changes"] = lc
                info["outcomes"] = collections.Counter()
                for labels, v in H.mseries(m, "politeproxy_requests_total").items():
                    info["outcomes"][dict(labels).get("outcome")] += v
            except Exception:  # noqa: BLE001
                pass
            info["cpu"] = cpu_seconds(proxy.pid)

        # stop the proxy: SIGTERM drains and exits 0
        code = proxy.stop()
        checks.append(("proxy exits 0 on SIGTERM", code == 0, "exit code %s" % code))
        info["log"] = log_summary(proxy)
        for name, msg in fails:
            checks.append((name, False, msg))
        rc = 0 if all(ok for _, ok, _ in checks) else 1
        report(args, info, tally, samples, end_sample, checks, reload_log, rss_first)
        if args.samples_csv:
            write_csv(args.samples_csv, samples)
        if rc != 0:
            print("---- proxy output tail ----")
            print(proxy.tail(40))
    except Exception:  # noqa: BLE001
        print("FAIL soak: unexpected error:\n%s" % traceback.format_exc(), flush=True)
        try:
            ctx.dump_proxy_output()
        except Exception:  # noqa: BLE001
            pass
        rc = 1
    finally:
        stop.set()
        try:
            ctx.cleanup()   # stops the proxy (by PID) and origin.py's origin
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            H._kill_all_live()
        for srv in ("faults", "echo"):
            o = locals().get(srv)
            if o is not None:
                o.stop()
        watchdog.cancel()
    print("%s soak (%.1f s)" % ("PASS" if rc == 0 else "FAIL", time.monotonic() - t_start),
          flush=True)
    return rc


def _i(v):
    return "-" if v is None else "%d" % v


def do_reload(proxy, echo, state, reload_log, fails):
    n = state["n"]
    state["n"] += 1
    before = reload_counts(proxy.metrics())
    t0 = time.monotonic()
    invalid = n % 4 == 1
    if invalid:
        text, why = invalid_config_text(echo.port, state["invalid"])
        state["invalid"] += 1
        desc = "invalid (%s)" % why
    else:
        var = VALID_VARIANTS[state["valid"] % len(VALID_VARIANTS)]
        state["valid"] += 1
        cfg = make_config(echo.port, **var)
        text = H.dump_config(cfg)
        desc = "valid (concurrency %d, rate %g%s)" % (
            var["concurrency"], var["rate"],
            ", overrides " + ",".join(var["overrides"]) if var.get("overrides") else "")
    tmp = proxy.config_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, proxy.config_path)
    os.kill(proxy.pid, signal.SIGHUP)
    want = (before[0] + (0 if invalid else 1), before[1] + (1 if invalid else 0))
    got = H.wait_until(lambda: reload_counts(proxy.metrics()) == want, 5.0, interval=0.1)
    now = reload_counts(proxy.metrics())
    took = time.monotonic() - t0
    ok = bool(got) and proxy.alive()
    note = ""
    if ok and not invalid:
        state["conc"] = var["concurrency"]
        state["override5"] = "h05.test" in (var.get("overrides") or {})
    # the configured limit /hosts shows must be the one of the last valid file
    try:
        hs = {h["key"]: h for h in hosts_json(proxy)}
        e = hs.get("h00.test")
        if e is not None and e.get("configured_limit") != state["conc"]:
            ok = False
            note = "; /hosts h00.test configured_limit %s, expected %d" % (
                e.get("configured_limit"), state["conc"])
        e5 = hs.get("h05.test")
        if e5 is not None and state["override5"] and e5.get("configured_limit") != 1:
            ok = False
            note += "; /hosts h05.test configured_limit %s, expected 1 (override)" % (
                e5.get("configured_limit"))
    except Exception as ex:  # noqa: BLE001
        ok = False
        note = "; /hosts failed: %s" % ex
    H.log("reload #%d %s: %s in %.2fs, counters success=%d failure=%d%s"
          % (n + 1, desc, "ok" if ok else "WRONG", took, now[0], now[1], note))
    reload_log.append((n + 1, desc, ok, took))
    if not ok:
        fails.append(("reload #%d" % (n + 1), "%s: expected counters %s, saw %s%s%s"
                      % (desc, want, now, note,
                         "" if proxy.alive() else "; the proxy died")))


def settle_state(proxy):
    out = {"busy_hosts": [], "busy_gauges": [], "n_hosts": 0}
    out["fds"] = fd_count(proxy.pid)   # before our own admin connection opens
    hs = hosts_json(proxy)
    out["n_hosts"] = len(hs)
    for h in hs:
        if h.get("in_flight") or h.get("waiting"):
            out["busy_hosts"].append("%s in_flight=%s waiting=%s" % (
                h.get("key"), h.get("in_flight"), h.get("waiting")))
    m = proxy.metrics()
    for name in ("politeproxy_host_in_flight", "politeproxy_host_waiting"):
        for labels, v in H.mseries(m, name).items():
            if v != 0:
                out["busy_gauges"].append("%s%s=%g" % (name[12:], dict(labels), v))
    out["quiet"] = not out["busy_hosts"] and not out["busy_gauges"]
    return out


def describe_new_fds(pid, base_table):
    now = fd_table(pid)
    new = {fd: tgt for fd, tgt in now.items() if base_table.get(fd) != tgt}
    gone = sorted(fd for fd, tgt in base_table.items() if now.get(fd) != tgt)
    if not new and not gone:
        return "none"
    inodes = {}
    for fd, tgt in new.items():
        m = re.match(r"socket:\[(\d+)\]", tgt)
        if m:
            inodes[m.group(1)] = fd
    socks = describe_sockets(set(inodes))
    parts = []
    for fd, tgt in sorted(new.items()):
        m = re.match(r"socket:\[(\d+)\]", tgt)
        extra = (" " + socks[m.group(1)]) if m and m.group(1) in socks else ""
        parts.append("%d=%s%s" % (fd, tgt, extra))
    if gone:
        parts.append("gone since the baseline: " + ", ".join(
            "%d=%s" % (fd, base_table[fd]) for fd in gone))
    return ", ".join(parts)


def rss_window(samples, lo, hi):
    v = [s.rss for s in samples if lo <= s.t < hi and s.rss is not None]
    return (sum(v) / len(v), len(v)) if v else (None, 0)


def rss_verdict(samples, load_len):
    if load_len >= 240:
        warm = (120.0, 180.0)
        tail = (load_len - 60.0, load_len + 1.0)
    else:
        warm = (load_len / 4, load_len / 2)
        tail = (load_len * 3 / 4, load_len + 1.0)
    wm, wn = rss_window(samples, *warm)
    tm, tn = rss_window(samples, *tail)
    r = {"warm": warm, "tail": tail, "warm_mean": wm, "tail_mean": tm,
         "max": max([s.rss for s in samples if s.rss] or [0]),
         "first": samples[0].rss if samples else None,
         "last": samples[-1].rss if samples else None, "ok": None}
    if wm is None or tm is None or wn < 2 or tn < 2:
        r["text"] = "warm-up window %d samples, last window %d" % (wn, tn)
        return r
    bound = max(RSS_BOUND_FRACTION * wm, RSS_BOUND_KIB)
    growth = tm - wm
    r["ok"] = growth <= bound
    r["growth"] = growth
    r["bound"] = bound
    r["text"] = ("mean %.1f MiB over t=%.0f-%.0fs, %.1f MiB over t=%.0f-%.0fs: %+.2f MiB"
                 " (bound +%.1f MiB = max(10%%, 5 MiB))"
                 % (wm / 1024, warm[0], warm[1], tm / 1024, tail[0], min(tail[1], load_len),
                    growth / 1024, bound / 1024))
    return r


def report(args, info, tally, samples, end_sample, checks, reload_log, rss_first):
    w = sys.stdout.write
    load = info.get("load_len", 0.0)
    w("\n==================== politeproxy soak summary ====================\n")
    w("binary          %s\n" % args.proxy)
    w("duration        load %.1f s (%.1f min), settle %.1f s; %d client threads, seed %d\n"
      % (load, load / 60, info.get("settle", 0.0), args.clients, args.seed))
    w("requests        %d (%.0f/s)\n" % (tally.requests, tally.requests / max(1.0, load)))
    w("\nby outcome (status, or status:proxy-error for answers the proxy made itself):\n")
    for lab, n in sorted(tally.by_label.items(), key=lambda kv: (-kv[1], kv[0])):
        w("  %-44s %8d\n" % (lab, n))
    w("\nby scenario (requests; outcomes):\n")
    for scn, n in sorted(tally.by_scenario.items(), key=lambda kv: (-kv[1], kv[0])):
        labs = sorted(((lab, k) for (s, lab), k in tally.by_scn_label.items() if s == scn),
                      key=lambda kv: -kv[1])
        w("  %-28s %7d   %s\n" % (scn, n, ", ".join("%s %d" % lk for lk in labs[:5])
                                   + (" ..." if len(labs) > 5 else "")))
    w("\nscenario runs (one connection each) and mean seconds per run:\n  ")
    w(", ".join("%s %d x %.2fs" % (k, tally.scn_runs[k], tally.scn_time[k] / tally.scn_runs[k])
                for k in sorted(tally.scn_runs)) + "\n")
    rss = info.get("rss", {})
    w("\nRSS (MiB)       first %s (before load), warm-up mean %s, last-window mean %s, "
      "last sample %s, max %s\n" % (
          fmt_mib(rss_first), fmt_mib(rss.get("warm_mean")), fmt_mib(rss.get("tail_mean")),
          fmt_mib(end_sample.rss if end_sample else rss.get("last")), fmt_mib(rss.get("max"))))
    w("fds             baseline %s, end %s (allowed <= baseline + %d), max during load %s\n"
      % (info.get("fd_base"), info.get("fd_end"), FD_SLACK, info.get("fd_max")))
    if info.get("fd_new") not in (None, "none"):
        w("                changed descriptors at the end: %s\n" % info["fd_new"])
    if "reloads" in info:
        v, i, ok_n, fail_n = info["reloads"]
        w("reloads         %d valid sent -> success %d; %d invalid sent -> failure %d\n"
          % (v, ok_n, i, fail_n))
    w("origin peak     max in flight per host seen by the origin: %s\n" % info.get("origin_peak"))
    if info.get("cpu") is not None:
        w("proxy CPU       %.1f s user+system over the run (%.1f ms per request)\n"
          % (info["cpu"], 1000 * info["cpu"] / max(1, tally.requests)))
    if info.get("outcomes"):
        w("proxy counted   requests_total by outcome: %s\n" % ", ".join(
            "%s %d" % (k, v) for k, v in sorted(info["outcomes"].items())))
    if info.get("limit_changes"):
        lc = info["limit_changes"]
        w("limit changes   healthy hosts: up %d, down %d, collapse %d; throttled/faulty and"
          " ephemeral: up %d, down %d, collapse %d\n" % tuple(
              lc[(g, d)] for g in ("healthy", "others") for d in ("up", "down", "collapse")))
    if info.get("hosts_end"):
        w("\nhosts at the end (limit/configured, rate/configured, p95 ms):\n")
        row = []
        for h in sorted(info["hosts_end"], key=lambda h: h["key"]):
            p95 = h.get("p95_seconds")
            row.append("%s %s/%s %g/%g %s" % (
                h["key"].split(".")[0], h.get("limit"), h.get("configured_limit"),
                h.get("rate") or 0, h.get("configured_rate") or 0,
                "-" if p95 is None else "%.0f" % (p95 * 1000)))
        for i in range(0, len(row), 4):
            w("  " + "   ".join("%-24s" % r for r in row[i:i + 4]).rstrip() + "\n")
    lg = info.get("log")
    if lg:
        w("\nproxy log: %d lines; %s\n" % (lg["lines"], ", ".join(
            "%s %d" % kv for kv in sorted(lg["levels"].items())) or "no levels"))
        for line in lg["notable"]:
            w("  | %s\n" % line[:200])
    w("\nsamples (every %.0f s; t from load start):\n" % SAMPLE_EVERY)
    w("  %7s %9s %5s %9s %7s %7s\n" % ("t", "rss MiB", "fds", "requests", "conns", "hosts"))
    step = max(1, len(samples) // 24)
    shown = samples[::step] + ([end_sample] if end_sample else [])
    for s in shown:
        w("  %7.0f %9s %5s %9d %7s %7s\n" % (s.t, fmt_mib(s.rss), _i(s.fds), s.requests,
                                             _i(s.client_conns), _i(s.hosts)))
    if tally.warns:
        w("\nwarnings (do not fail the run; look at them):\n")
        for kind, n in tally.warns.most_common():
            w("  %6d  %s\n" % (n, kind))
            for ex in tally.warn_examples[kind][:4]:
                w("          e.g. %s\n" % ex[:300])
    if tally.fails:
        w("\nrequest failures:\n")
        for kind, n in tally.fails.most_common():
            w("  %6d  %s\n" % (n, kind))
            for ex in tally.fail_examples[kind][:6]:
                w("          e.g. %s\n" % ex[:400])
    w("\nchecks:\n")
    for name, ok, text in checks:
        w("  %-4s %-52s %s\n" % ("ok" if ok else "FAIL", name, text))
    w("==================================================================\n")
    sys.stdout.flush()


def log_summary(proxy):
    """Counts of the proxy's log lines by level, and the distinct WARN/ERROR lines other
    than the expected 'reload rejected' ones (first 8)."""
    with proxy._lock:
        lines = list(proxy.lines)
    levels = collections.Counter()
    notable, seen = [], set()
    for line in lines:
        lvl = line.split(" ", 1)[0]
        if lvl in ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL"):
            levels[lvl] += 1
        if lvl in ("WARN", "WARNING", "ERROR", "FATAL") and "reload rejected" not in line:
            key = re.sub(r"\d+", "N", line)[:80]
            if key not in seen and len(notable) < 8:
                seen.add(key)
                notable.append(line)
        elif lvl not in levels and not line.startswith(("politeproxy:", "INFO", "DEBUG")):
            key = line[:60]
            if key not in seen and len(notable) < 8:
                seen.add(key)
                notable.append(line)
    return {"lines": len(lines), "levels": levels, "notable": notable}


def write_csv(path, samples):
    with open(path, "w") as f:
        f.write("t_s,rss_kib,fds,requests,client_conns,upstream_conns,tunnels,hosts_tracked\n")
        for s in samples:
            f.write("%.1f,%s,%s,%d,%s,%s,%s,%s\n" % (
                s.t, s.rss, s.fds, s.requests, _i(s.client_conns), _i(s.upstream),
                _i(s.tunnels), _i(s.hosts)))


if __name__ == "__main__":
    sys.exit(main())
