"""The raw-socket origin of the fault-path tests (test_fault_paths_origin.py,
test_fault_paths_client.py): FaultOrigin picks its behaviour from the request path and
records every request (when it was at the origin, how it ended, the bytes both ways).
  /close    reads the request, then closes without an answer
  /midbody  200 with Content-Length MIDBODY_CL, MIDBODY_SENT bytes, then RST
  /hang     no answer; holds the connection until the proxy closes it
  /garbage  bytes that are not HTTP
  /upload   reads the request body to its Content-Length (or until the proxy stops)
  /big      BIG_CL bytes sent slowly, BIG_CHUNK at a time
  /slow     the 200 header at once, the body SLOW seconds later
  else      200 "ok"
"""
import socket
import struct
import time

import harness as H

MIDBODY_CL = 1000000
MIDBODY_SENT = 20000
BIG_CL = 5 * 1024 * 1024
BIG_CHUNK = 64 * 1024
BIG_PAUSE = 0.03            # 80 chunks: ~2.4 s for the whole body if nobody stops it
UPLOAD_CL = 1024 * 1024
UPLOAD_SENT = 10 * 1024
SLOW = 1.0                  # /slow: 200 header at once, body after SLOW seconds


def pattern(n):
    return bytes((i * 31 + 7) % 251 for i in range(n))


MIDBODY_BYTES = pattern(MIDBODY_SENT)
BIG_PIECE = pattern(BIG_CHUNK)


class FaultOrigin(H.RawServer):
    """Threaded TCP server on 127.0.0.1:0, keep-alive. One record per request:
    path, target, conn, start (head read), end (handler done), outcome, body (request
    body bytes read), sent (response bytes written)."""

    def __init__(self):
        self.records = []
        H.RawServer.__init__(self, "fault-origin")

    def _serve(self, s, idx):
        s.settimeout(10)
        buf = b""
        try:
            while True:
                got = H.recv_head(s, buf)
                if got is None:
                    return
                head, buf = got
                lines = head.decode("latin-1").split("\r\n")
                parts = (lines[0].split(" ", 2) + ["", "", ""])[:3]
                headers = {}
                for l in lines[1:]:
                    k, _, v = l.partition(":")
                    headers[k.strip().lower()] = v.strip()
                rec = {"conn": idx, "method": parts[0], "target": parts[1],
                       "path": parts[1].split("?")[0], "start": time.monotonic(),
                       "end": None, "outcome": None, "body": 0, "sent": 0}
                with self.lock:
                    self.records.append(rec)
                keep = False
                try:
                    keep, buf = self._handle(s, rec, headers, buf)
                except OSError as e:
                    rec["outcome"] = rec["outcome"] or "%s: %s" % (type(e).__name__, e)
                finally:
                    if rec["end"] is None:
                        rec["end"] = time.monotonic()
                if not keep:
                    return
        except OSError:
            return
        finally:
            try:
                s.close()
            except OSError:
                pass

    def _send(self, s, rec, data):
        s.sendall(data)
        rec["sent"] += len(data)

    def _wait_peer_close(self, s, rec, limit):
        """Hold the connection until the proxy closes it (or `limit` seconds)."""
        t0 = time.monotonic()
        s.settimeout(limit)
        try:
            while s.recv(65536):
                pass
            rec["outcome"] = "proxy closed after %.2fs" % (time.monotonic() - t0)
        except socket.timeout:
            rec["outcome"] = "proxy still connected after %.1fs" % limit
        except OSError as e:
            rec["outcome"] = "proxy reset after %.2fs (%s)" % (time.monotonic() - t0, e)

    def _handle(self, s, rec, headers, buf):
        path = rec["path"]
        if path == "/close":
            # read the request, then close: no response at all
            rec["outcome"] = "closed without answering"
            return False, b""
        if path == "/midbody":
            self._send(s, rec, ("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream"
                                "\r\nContent-Length: %d\r\n\r\n" % MIDBODY_CL).encode())
            self._send(s, rec, MIDBODY_BYTES)
            time.sleep(0.05)
            # RST: SO_LINGER on with a zero timeout, then close
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            rec["outcome"] = "reset after %d body bytes" % MIDBODY_SENT
            return False, b""
        if path == "/hang":
            self._wait_peer_close(s, rec, 6.0)
            return False, b""
        if path == "/garbage":
            self._send(s, rec, b"SSH-2.0-OpenSSH_9.6 this is \x00\x01 not HTTP\r\n"
                               b"garbage garbage\r\n\r\n")
            self._wait_peer_close(s, rec, 4.0)
            return False, b""
        if path == "/upload":
            n = int(headers.get("content-length", "0"))
            rec["body"] = len(buf)
            s.settimeout(6.0)
            try:
                while rec["body"] < n:
                    d = s.recv(65536)
                    if not d:
                        rec["outcome"] = "EOF after %d of %d body bytes" % (rec["body"], n)
                        return False, b""
                    rec["body"] += len(d)
            except socket.timeout:
                rec["outcome"] = "proxy idle with %d of %d body bytes" % (rec["body"], n)
                return False, b""
            rec["outcome"] = "whole body (%d bytes)" % n
            self._send(s, rec, ok(b"got it"))
            return False, b""
        if path == "/big":
            self._send(s, rec, ("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream"
                                "\r\nContent-Length: %d\r\n\r\n" % BIG_CL).encode())
            body = 0
            s.settimeout(6.0)
            try:
                while body < BIG_CL:
                    piece = BIG_PIECE[:BIG_CL - body]
                    s.sendall(piece)
                    body += len(piece)
                    rec["sent"] += len(piece)
                    time.sleep(BIG_PAUSE)
            except OSError as e:
                rec["outcome"] = "aborted after %d body bytes (%s)" % (body, type(e).__name__)
                return False, b""
            rec["outcome"] = "sent all %d bytes" % BIG_CL
            return False, b""
        if path == "/slow":
            # the header at once (well inside response_headers 1s), the body ~1s later:
            # the request is in flight, holding its slot, for ~1s
            body = b"slow ok"
            self._send(s, rec, ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                "Content-Length: %d\r\n\r\n" % len(body)).encode())
            time.sleep(SLOW)
            # counted out of flight just before the last bytes leave, so that the next
            # request (the proxy may send it as soon as these arrive) never overlaps
            rec["outcome"] = "200"
            rec["end"] = time.monotonic()
            self._send(s, rec, body)
            return True, buf
        self._send(s, rec, ok(b"ok"))
        rec["outcome"] = "200"
        return True, buf

    # -- queries --------------------------------------------------------------------
    def recs(self, path=None, tag=None):
        with self.lock:
            return [dict(r) for r in self.records
                    if (path is None or r["path"] == path)
                    and (tag is None or ("tag=%s" % tag) in r["target"].split("?", 1)[-1]
                         .split("&"))]

    def summary(self, path=None):
        return "origin: %d connection(s); requests %s" % (
            self.accepted, [(r["conn"], r["method"], r["target"], r["outcome"])
                            for r in self.recs(path)])


def ok(body):
    return ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
            % len(body)).encode() + body
