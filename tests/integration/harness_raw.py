"""Raw sockets, for tests that check exact bytes: RawClient (a TCP connection to the
proxy for hand-written requests, parsing the responses it reads and keeping every byte),
RawServer (a threaded TCP server on 127.0.0.1:0 for origins that answer with exact
bytes), recv_until/recv_head/recv_to_close, raw_get (the bytes of an absolute-form GET),
connect_tunnel (a CONNECT answered 200) and free_port."""
import re
import socket
import threading
import time

from harness_checks import TestFailure


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


def recv_to_close(s):
    """Every byte `s` receives until the peer closes it (errors are the caller's)."""
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            return out
        out += d


def recv_head(s, buf):
    """A whole message head from `s` (what `buf` already holds first): (head, the bytes
    after it), or None if the peer closed first."""
    buf = recv_until(s, buf, lambda b: b"\r\n\r\n" in b)
    if buf is None:
        return None
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


_ports_handed_out = set()


def free_port():
    """A loopback port with nothing listening (bind, read the number, close), never one this
    process was given before: the kernel may hand a just-closed number out again, and two
    servers of one test (a Redis Cluster's nodes) on one number is a broken setup."""
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _ports_handed_out:
            _ports_handed_out.add(port)
            return port


def raw_get(port, host, origin_port, path="/", extra_headers="", connection="close"):
    """Bytes of an absolute-form GET for the proxy."""
    return ("GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n%sConnection: %s\r\n\r\n"
            % (host, origin_port, path, host, origin_port, extra_headers, connection)
            ).encode()


def connect_tunnel_raw(proxy, host, port, headers=None, timeout=10):
    """CONNECT host:port with `headers`: (the socket, the answer's head as bytes), whatever it says."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    fields = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n" % (host, port, host, port, fields)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return s, head


def connect_tunnel(proxy, host, port, timeout=10):
    """A socket to the proxy on which CONNECT host:port was answered 200 (read to the end
    of the answer, nothing more)."""
    s, head = connect_tunnel_raw(proxy, host, port, timeout=timeout)
    if not head.startswith(b"HTTP/1.1 200"):
        s.close()
        raise TestFailure("CONNECT %s:%d answered %r" % (host, port, head))
    return s

