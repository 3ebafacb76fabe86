"""A raw-socket origin for integration tests that check exact bytes (test_framing_*,
test_hostile_input_*): it answers with exact bytes and records the connections it
accepted, every request byte it saw per connection, when each peer closed, and every
request it could parse."""
import socket
import time

import harness as H


def ok(body, extra=""):
    """A keep-alive 200 with Content-Length."""
    return ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n"
            % (len(body), extra)).encode() + body


class RawOrigin(H.RawServer):
    """Threaded TCP server on 127.0.0.1:0. For every request header (and its
    Content-Length or chunked body) it calls handler(req) -> (response, after):
      response  bytes, or a list of bytes and floats (a float = sleep that long)
      after     "keep" (read the next request), "close" (shutdown + close), or a float:
                keep the connection idle that many seconds, then close it silently
    req is a dict: conn (0-based accept index), method, target, version, headers
    [(name, value)], head (raw bytes of the header section), body (decoded), trailers
    (raw trailer lines of a chunked body), t0 / t1 (time.monotonic() when the head had
    arrived / when the origin began to write the response: no proxy can have seen the
    response before t1, so [t0, t1] is when the request was surely in flight).
    A connection silent for conn_timeout seconds inside a request, or idle_timeout
    (default: conn_timeout) between requests, is closed: the origin never hangs."""

    def __init__(self, name, handler, conn_timeout=15, idle_timeout=None):
        self.name = name
        self.handler = handler
        self.conn_timeout = conn_timeout
        self.idle_timeout = conn_timeout if idle_timeout is None else idle_timeout
        self.received = []   # per connection: every byte read from it
        self.eof_at = {}     # connection -> time.monotonic() when the peer closed it
        self.requests = []
        self.errors = []
        H.RawServer.__init__(self, "raw-origin-" + name)

    def _accepted(self, idx):
        self.received.append(bytearray())

    def _recv(self, s, idx):
        d = s.recv(65536)
        with self.lock:
            if d:
                self.received[idx] += d
            else:
                self.eof_at.setdefault(idx, time.monotonic())
        return d

    def _serve(self, s, idx):
        buf = b""
        try:
            while True:
                s.settimeout(self.conn_timeout if buf else self.idle_timeout)
                while b"\r\n\r\n" not in buf:
                    d = self._recv(s, idx)
                    if not d:
                        return
                    buf += d
                    s.settimeout(self.conn_timeout)
                head, _, buf = buf.partition(b"\r\n\r\n")
                t0 = time.monotonic()
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ", 2)
                method, target, version = (parts + ["", "", ""])[:3]
                headers = []
                for l in lines[1:]:
                    k, _, v = l.partition(":")
                    headers.append((k.strip(), v.strip()))
                hd = {k.lower(): v for k, v in headers}
                body = b""
                trailers = []
                if "content-length" in hd:
                    n = int(hd["content-length"])
                    while len(buf) < n:
                        d = self._recv(s, idx)
                        if not d:
                            raise OSError("EOF after %d of %d body bytes" % (len(buf), n))
                        buf += d
                    body, buf = buf[:n], buf[n:]
                elif "chunked" in hd.get("transfer-encoding", "").lower():
                    while True:
                        while b"\r\n" not in buf:
                            d = self._recv(s, idx)
                            if not d:
                                raise OSError("EOF inside a chunked request body")
                            buf += d
                        line, _, buf = buf.partition(b"\r\n")
                        size = int(line.split(b";")[0].strip(), 16)
                        if size == 0:
                            # trailer lines up to the empty line ("0\r\n\r\n": none)
                            while True:
                                while b"\r\n" not in buf:
                                    d = self._recv(s, idx)
                                    if not d:
                                        raise OSError("EOF inside the trailer section")
                                    buf += d
                                line, _, buf = buf.partition(b"\r\n")
                                if not line:
                                    break
                                trailers.append(line)
                            break
                        while len(buf) < size + 2:
                            d = self._recv(s, idx)
                            if not d:
                                raise OSError("EOF inside a chunk")
                            buf += d
                        body += buf[:size]
                        buf = buf[size + 2:]
                req = {"conn": idx, "method": method, "target": target, "version": version,
                       "headers": headers, "head": head, "body": body, "trailers": trailers,
                       "t0": t0, "t1": None}
                with self.lock:
                    self.requests.append(req)
                response, after = self.handler(req)
                for piece in (response if isinstance(response, list) else [response]):
                    if isinstance(piece, float):
                        time.sleep(piece)
                    else:
                        if req["t1"] is None:
                            req["t1"] = time.monotonic()
                        s.sendall(piece)
                if after == "close":
                    s.shutdown(socket.SHUT_WR)
                    return
                if isinstance(after, float):
                    # idle, then a silent close; whatever arrives meanwhile is recorded
                    deadline = time.monotonic() + after
                    while True:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        s.settimeout(left)
                        try:
                            if not self._recv(s, idx):
                                break
                        except socket.timeout:
                            break
                    return
        except (OSError, ValueError) as e:
            with self.lock:
                self.errors.append("conn %d: %s: %s" % (idx, type(e).__name__, e))
        finally:
            try:
                s.close()
            except OSError:
                pass

    # -- queries --------------------------------------------------------------------
    def all_received(self):
        with self.lock:
            return b"".join(bytes(r) for r in self.received)

    def reqs(self):
        with self.lock:
            return list(self.requests)

    def mark(self):
        """A point in the recording, for since()."""
        with self.lock:
            return [len(r) for r in self.received], len(self.requests)

    def since(self, mark):
        """({connection: bytes received on it since mark}, [requests parsed since])."""
        lengths, nreq = mark
        with self.lock:
            got = {}
            for idx, r in enumerate(self.received):
                start = lengths[idx] if idx < len(lengths) else 0
                if len(r) > start:
                    got[idx] = bytes(r[start:])
            return got, list(self.requests[nreq:])

    def summary(self):
        with self.lock:
            return "%s origin: %d connection(s) accepted, requests %s, errors %s" % (
                self.name, self.accepted,
                [(r["conn"], r["method"], r["target"]) for r in self.requests], self.errors)
