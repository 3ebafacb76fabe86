#!/usr/bin/python3
"""Loopback test origin for politeproxy integration tests.

Counts, per Host header (host part, lower-cased, no port), the requests in flight as
the origin perceives them: +1 when a request's headers have arrived, -1 once its
response has been fully written (or the connection failed).  Keeps per host the peak,
the total count, the arrival times (time.monotonic(), which is system-wide on Linux, so
the test process can compare them with its own clock) and one record per request.

Query parameters choose the behaviour of an ordinary request:
  delay=<seconds>      sleep before answering (after the body has been read)
  status=<code>        response status (default 200)
  size=<bytes>         response body of exactly that many bytes
  chunked=1            the response body goes chunked (no Content-Length)
  trailers=1           with chunked=1: the trailer section carries X-Checksum: sha256=abc
A chunked request body's trailer fields are reported as "trailers" in the JSON answer.
  retry_after=<value>  adds a Retry-After header
  header=<Name:value>  adds that header field
A GET /robots.txt for a host given one with set_robots() answers it (counted as usual).
Any method is accepted.  A request body (Content-Length or chunked) is read fully; the
response to POST/PUT/PATCH (or any request that carried a body) is JSON with the body's
length and sha256.  Otherwise the body is a small JSON echo of the request.

Control endpoints (reached directly, never counted):
  GET  /_stats   JSON {host: {peak, in_flight, count, completed, arrivals, requests}}
  POST /_reset   forget everything

Use as a class:
    o = Origin(); o.start(); o.port; o.stats(); o.reset(); o.stop()
    Origin(tls=True, certfile=..., keyfile=...)   (see make_cert)
or as a script:
    /usr/bin/python3 origin.py [--port 0] [--tls [--cert C --key K]]
which prints "origin: listening port=N tls=0|1" on stdout and serves until killed.
"""

import argparse
import hashlib
import http
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CONTROL_PATHS = ("/_stats", "/_reset")
MAX_RECORDS_PER_HOST = 10000


def host_part(host_header):
    """'A.Test:8080' -> 'a.test'; '[::1]:80' -> '::1'; '' -> ''."""
    h = (host_header or "").strip().lower()
    if h.startswith("["):
        end = h.find("]")
        return h[1:end] if end > 0 else h
    if h.count(":") == 1:
        h = h.split(":", 1)[0]
    return h.rstrip(".")


def make_cert(directory, cn="tls.test", extra_names=()):
    """Self-signed certificate (CN and SAN = cn) via the openssl CLI.
    Returns (certfile, keyfile)."""
    cert = os.path.join(directory, "origin-cert.pem")
    key = os.path.join(directory, "origin-key.pem")
    san = ",".join(n if n.startswith("IP:") else "DNS:" + n for n in (cn,) + tuple(extra_names))
    cmd = ["openssl", "req", "-x509", "-newkey", "ec",
           "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", key, "-out", cert, "-days", "2",
           "-subj", "/CN=" + cn, "-addext", "subjectAltName=" + san]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=30)
    if r.returncode != 0:
        raise RuntimeError("openssl failed (%d): %s"
                           % (r.returncode, r.stdout.decode(errors="replace")))
    return cert, key


class _HostStats:
    def __init__(self):
        self.in_flight = 0
        self.peak = 0
        self.count = 0
        self.completed = 0
        self.arrivals = []
        self.requests = []

    def to_json(self):
        return {"peak": self.peak, "in_flight": self.in_flight, "count": self.count,
                "completed": self.completed, "arrivals": list(self.arrivals),
                "requests": [dict(r) for r in self.requests]}


class OriginState:
    def __init__(self):
        self.lock = threading.Lock()
        self.hosts = {}
        self.robots = {}  # host -> (status, body, delay, headers)

    def begin(self, host, method, target):
        now = time.monotonic()
        with self.lock:
            hs = self.hosts.get(host)
            if hs is None:
                hs = self.hosts[host] = _HostStats()
            hs.in_flight += 1
            hs.peak = max(hs.peak, hs.in_flight)
            hs.count += 1
            hs.arrivals.append(now)
            rec = {"method": method, "target": target, "start": now, "end": None,
                   "status": None, "error": None, "body_length": None}
            if len(hs.requests) < MAX_RECORDS_PER_HOST:
                hs.requests.append(rec)
        return hs, rec

    def end(self, hs, rec, status=None, error=None):
        now = time.monotonic()
        with self.lock:
            if rec["end"] is not None:  # ended as its response went out; then it failed
                rec["error"] = error
                if error is not None:
                    hs.completed -= 1
                return
            hs.in_flight -= 1
            rec["end"] = now
            rec["status"] = status
            rec["error"] = error
            if error is None:
                hs.completed += 1

    def snapshot(self):
        with self.lock:
            return {h: s.to_json() for h, s in self.hosts.items()}

    def reset(self):
        with self.lock:
            # in-flight requests keep a reference to their old _HostStats object, so
            # their end() never touches the fresh counters
            self.hosts = {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "politeproxy-test-origin/1"
    sys_version = ""
    # TCP_NODELAY, and headers + body in one write (below): otherwise Nagle and the
    # peer's delayed ACK add ~40 ms to every response on a kept-alive connection
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("origin: %s - %s\n" % (self.address_string(), fmt % args))

    # every method goes to _handle
    def __getattr__(self, name):
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    # -- body helpers -------------------------------------------------------------
    def _read_body(self):
        self.trailers = []
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("EOF in chunk size")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    break
                data = self.rfile.read(size)
                if len(data) != size:
                    raise ConnectionError("EOF in chunk data")
                parts.append(data)
                self.rfile.readline(65537)  # CRLF after chunk
            while True:  # trailers
                line = self.rfile.readline(65537)
                if not line or line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                self.trailers.append([name.strip().lower(), value.strip()])
            return b"".join(parts), True
        cl = self.headers.get("Content-Length")
        if cl is not None:
            n = int(cl)
            data = self.rfile.read(n) if n > 0 else b""
            if len(data) != n:
                raise ConnectionError("EOF in body (%d of %d)" % (len(data), n))
            return data, True
        return b"", False

    def _send(self, status, body, ctype="application/json", extra=(), before_write=None, chunked=False,
              trailers=None):
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Status %d" % status
        self.send_response_only(status, reason)
        self.send_header("Date", self.date_time_string())
        self.send_header("Server", self.server_version)
        no_body = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        for k, v in extra:
            self.send_header(k, v)
        if status != 204 and not 100 <= status < 200:
            self.send_header("Content-Type", ctype)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n")
        if chunked and not no_body:  # in chunks of up to 64 KiB
            for i in range(0, len(body), 65536):
                piece = body[i:i + 65536]
                self._headers_buffer.append(b"%x\r\n%s\r\n" % (len(piece), piece))
            self._headers_buffer.append(b"0\r\n" + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode())
                                                          for k, v in (trailers or ())) + b"\r\n")
        elif not no_body and body:
            self._headers_buffer.append(body)
        if before_write is not None:
            before_write()
        self.flush_headers()  # one write: status line, headers and body

    # -- control endpoints ----------------------------------------------------------
    def _control(self, path):
        try:
            self._read_body()
        except (ValueError, ConnectionError):
            self.close_connection = True
            return
        if path == "/_stats":
            body = json.dumps({"now": time.monotonic(),
                               "hosts": self.server.state.snapshot()}).encode()
            self._send(200, body)
        elif path == "/_reset" and self.command == "POST":
            self.server.state.reset()
            self._send(200, b'{"reset": true}')
        else:
            self._send(405, b'{"error": "method not allowed"}')

    # -- ordinary requests ----------------------------------------------------------
    def _handle(self):
        target = self.path
        url = urlsplit(target)
        path = url.path or "/"
        if path in CONTROL_PATHS:
            return self._control(path)
        host = host_part(self.headers.get("Host", ""))
        if not host and url.hostname:  # absolute-form request without Host
            host = url.hostname.lower()
        state = self.server.state
        hs, rec = state.begin(host, self.command, target)
        status = None
        try:
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            body, had_body = self._read_body()
            rec["body_length"] = len(body) if had_body else None
            robots = state.robots.get(host) if path == "/robots.txt" and self.command == "GET" else None
            if robots:
                status, out, delay, headers = robots
                time.sleep(delay)
                self._send(status, out.encode(), "text/plain", list(headers),
                           before_write=lambda: state.end(hs, rec, status, None))
                return
            delay = float(q.get("delay", "0") or 0)
            if delay > 0:
                time.sleep(delay)
            status = int(q.get("status", "200"))
            extra = []
            if "retry_after" in q:
                extra.append(("Retry-After", q["retry_after"]))
            if "header" in q:
                name, _, value = q["header"].partition(":")
                extra.append((name, value))
            if had_body or self.command in ("POST", "PUT", "PATCH"):
                out = json.dumps({"method": self.command, "host": host,
                                  "length": len(body),
                                  "sha256": hashlib.sha256(body).hexdigest(),
                                  "chunked": "chunked" in self.headers.get(
                                      "Transfer-Encoding", "").lower(),
                                  "trailers": getattr(self, "trailers", [])}).encode()
                ctype = "application/json"
            elif "size" in q:
                n = int(q["size"])
                pattern = b"0123456789abcdef"
                out = (pattern * (n // len(pattern) + 1))[:n]
                ctype = "application/octet-stream"
            else:
                out = json.dumps({"method": self.command, "host": host,
                                  "target": target,
                                  "headers": [[k, v] for k, v in self.headers.items()]
                                  }).encode()
                ctype = "application/json"
            # The request stops being in flight as its whole response goes to the
            # socket: from then on the proxy may read it and send the next request at
            # any moment, and recording the end after the write would let that next
            # request overlap this one's bookkeeping (a thread switch can delay it by
            # milliseconds). A proxy that sends before it has the response is still seen.
            self._send(status, out, ctype, extra,
                       before_write=lambda: state.end(hs, rec, status, None), chunked=q.get("chunked") == "1",
                       trailers=[("X-Checksum", "sha256=abc")] if q.get("trailers") == "1" else None)
        except (OSError, ValueError, ConnectionError) as e:
            self.close_connection = True
            state.end(hs, rec, status, "%s: %s" % (type(e).__name__, e))
            return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, ssl_context=None, verbose=False):
        self.ssl_context = ssl_context
        self.verbose = verbose
        self.state = OriginState()
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def finish_request(self, request, client_address):
        sock = request
        with self.conns_lock:
            self.conns.add(request)
        try:
            if self.ssl_context is not None:
                request.settimeout(10)
                try:
                    sock = self.ssl_context.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError) as e:
                    if self.verbose:
                        sys.stderr.write("origin: TLS handshake failed: %s\n" % e)
                    return
                sock.settimeout(None)
                with self.conns_lock:
                    self.conns.add(sock)
            self.RequestHandlerClass(sock, client_address, self)
        finally:
            with self.conns_lock:
                self.conns.discard(request)
                self.conns.discard(sock)
            if sock is not request:
                try:
                    sock.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)

    def close_all_connections(self):
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Origin:
    """A loopback origin running in a background thread."""

    def __init__(self, tls=False, certfile=None, keyfile=None, verbose=False, port=0, address="127.0.0.1"):
        self.tls = tls
        self.address = address
        self.requested_port = port
        self.certfile = certfile
        self.keyfile = keyfile
        self.verbose = verbose
        self._tmp = None
        self.server = None
        self.thread = None
        self.port = None

    def start(self):
        ctx = None
        if self.tls:
            if not (self.certfile and self.keyfile):
                self._tmp = tempfile.TemporaryDirectory(prefix="pp-origin-")
                self.certfile, self.keyfile = make_cert(self._tmp.name)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.certfile, self.keyfile)
            ctx.set_alpn_protocols(["http/1.1"])
        self.server = _Server((self.address, self.requested_port), ctx, self.verbose)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1},
                                       name="origin-%d" % self.port, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.close_all_connections()
            self.server.server_close()
            self.server = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # in-process access (same data as GET /_stats)
    def stats(self):
        return self.server.state.snapshot()

    def set_robots(self, host, body, status=200, delay=0.0, headers=()):
        """GET /robots.txt for `host` answers `status` with `body` and `headers` ((name, value)
        pairs) after `delay` seconds."""
        self.server.state.robots[host] = (status, body, delay, tuple(headers))

    def host(self, name):
        """Stats of one host, with zeros when the origin never saw it."""
        return self.stats().get(name) or _HostStats().to_json()

    def reset(self):
        self.server.state.reset()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    o = Origin(tls=a.tls, certfile=a.cert, keyfile=a.key, verbose=a.verbose,
               port=a.port).start()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print("origin: listening port=%d tls=%d" % (o.port, 1 if a.tls else 0), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        o.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
