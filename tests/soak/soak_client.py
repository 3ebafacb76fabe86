"""A small raw HTTP/1.1 client with one absolute deadline per connection (Client), the
errors it reports (ConnError), the responses it parses (Resp), and the bytes it sends:
request heads (req_head) and chunked bodies (chunked). rst_close makes a close send
RST; the fault origin uses it too. Every byte any client receives is scanned for the
desync origin's stray markers (scan_markers; what it finds is in marker_hits())."""

import re
import socket
import struct
import threading
import time

from soak_config import MARKERS

_marker_lock = threading.Lock()
_marker_hits = []      # (what, bytes around it), the first few
_marker_count = [0]


def scan_markers(data, tail, what):
    """Notes a stray marker in data (tail: the bytes received just before it, so a
    marker split between two reads is found). Returns the new tail."""
    for m in MARKERS:
        if m in data or m in tail + data[:len(m)]:
            with _marker_lock:
                _marker_count[0] += 1
                if len(_marker_hits) < 8:
                    i = data.find(m)
                    _marker_hits.append((what, data[max(0, i - 60):i + 40]))
            break
    return (tail + data[-32:])[-32:]


def marker_hits():
    with _marker_lock:
        return _marker_count[0], list(_marker_hits)


def rst_close(s):
    """Make the coming close() of socket s send RST instead of FIN."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


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
    def __init__(self, port, deadline, what="http1"):
        self.deadline = deadline
        self.buf = b""
        self.what = what
        self._tail = b""
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
        self._tail = scan_markers(d, self._tail, self.what)
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
            rst_close(self.sock)
        try:
            self.sock.close()
        except OSError:
            pass


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
