"""The desync origin: a raw keep-alive HTTP/1.1 origin whose answer is chosen by the
request's path, /dz/<kind>?id=<id> (tagging.KINDS), and which tags every real answer
with the request's id (X-Answer-To: <id>, body "answer to <id>\\n" where a body
belongs). The misbehaving kinds send bytes that answer no request, each carrying a
marker (soak_config.MARKERS) no client may ever see:

  head_body / head_late   HEAD answered with Content-Length and a body, in the same
                          write / 0.05-0.2 s later
  204, 304 / _late        then a complete "HTTP/1.1 200 ... EVIL-..." response, in the
                          same write / 0.05-0.2 s later (304 with or without CL: 0)
  101                     an unsolicited 101 and HTTP-looking bytes (same write or later)
  1xx                     "150 Unknown" with a complete response behind it
  reset, reset_head       RST before any byte / after part of a status line
  interim                 100 and/or 103, then the tagged 200

What the origin itself can see is checked here too: a connection on which it sent
stray bytes (or a 101/1xx) must never carry another request; one that does is a
violation (the proxy reused a connection whose bytes belong to no request).

Late stray bytes are coordinated with the client (settle_late): the client waits until
they went out (or cancels them if they did not within LATE_WAIT), so no request of its
own can race them onto the connection."""

import collections
import random
import socket
import threading
import time
from urllib.parse import parse_qs, urlsplit

from fault_origins import _PrunedServer
from soak_client import rst_close
from soak_config import EVIL_MARK, STRAY_DELAY, STRAY_MARK
from tagging import KINDS, answer_body

EVIL = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Answer-To: " + EVIL_MARK
        + b"\r\nContent-Length: %d\r\n\r\n" % len(EVIL_MARK) + EVIL_MARK)
STRAY_BODY = (STRAY_MARK + b"-") * 4
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
IDLE_TIMEOUT = 20.0       # between requests on a connection (the proxy's idle is 3 s)
REQUEST_TIMEOUT = 10.0    # inside a request
MAX_VIOLATIONS = 50


def tagged(status, rid, body=b"", length=None, extra=b""):
    reason = {200: b"OK", 204: b"No Content", 304: b"Not Modified"}[status]
    head = b"HTTP/1.1 %d %s\r\nX-Answer-To: %s\r\n" % (status, reason, rid.encode()) + extra
    if status == 200:
        head += b"Content-Type: text/plain\r\nContent-Length: %d\r\n" % (
            len(body) if length is None else length)
    return head + b"\r\n" + body


class _Late:
    """One late stray sending: pending -> sent | cancelled (| failed)."""
    __slots__ = ("lock", "event", "state", "t")

    def __init__(self):
        self.lock = threading.Lock()
        self.event = threading.Event()
        self.state = "pending"
        self.t = time.monotonic()


class DesyncOrigin(_PrunedServer):
    def __init__(self):
        self.late = {}                       # request id -> _Late
        self.kinds = collections.Counter()   # kind -> requests answered
        self.late_states = collections.Counter()
        self.violations = []
        self.n_violations = 0
        _PrunedServer.__init__(self, "soak-desync-origin")

    # -- what the clients and the checks use -----------------------------------------
    def settle_late(self, rid, wait):
        """After the client got its bodiless answer to a late kind: wait (at most `wait`
        s) until the stray bytes went out; if they did not, cancel them. Returns 'sent',
        'cancelled', 'failed' or 'unknown' (the origin never saw the request)."""
        with self.lock:
            lt = self.late.pop(rid, None)
            if lt is None and wait <= 0:
                # the request may still reach the origin: its late bytes are called off
                lt = self.late[rid] = _Late()
                lt.state = "cancelled"
                return "unknown"
        if lt is None:
            return "unknown"
        lt.event.wait(wait)
        with lt.lock:
            if lt.state == "pending":
                lt.state = "cancelled"
            state = lt.state
        with self.lock:
            self.late_states[state] += 1
        return state

    def summary(self):
        with self.lock:
            return (collections.Counter(self.kinds), collections.Counter(self.late_states),
                    self.n_violations, list(self.violations))

    def _violation(self, text):
        with self.lock:
            self.n_violations += 1
            if len(self.violations) < MAX_VIOLATIONS:
                self.violations.append(text)

    def _late_entry(self, rid):
        lt = _Late()
        with self.lock:
            old = [k for k, v in self.late.items() if lt.t - v.t > 60]
            for k in old:          # a client that never asked (it failed first)
                del self.late[k]
            if rid in self.late:   # called off before the request got here
                return self.late.pop(rid)
            self.late[rid] = lt
        return lt

    # -- serving ----------------------------------------------------------------------
    def _serve_conn(self, s):
        rng = random.Random()
        buf = b""
        spoiled = None     # what this connection carried that answers no request
        while True:
            s.settimeout(IDLE_TIMEOUT)
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
                s.settimeout(REQUEST_TIMEOUT)
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            method = parts[0]
            target = parts[1] if len(parts) > 1 else "/"
            hd = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                hd[k.strip().lower()] = v.strip()
            n = int(hd.get("content-length", "0") or 0)
            while len(buf) < n:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            buf = buf[n:]
            url = urlsplit(target)
            rid = hd.get("x-req-id") or (parse_qs(url.query).get("id") or ["?"])[0]
            kind = url.path[len("/dz/"):] if url.path.startswith("/dz/") else "ok"
            if kind not in KINDS:
                kind = "ok"
            if spoiled:
                self._violation("request %s (%s %s) arrived on an origin connection after %s"
                                % (rid, method, kind, spoiled))
                return
            with self.lock:
                self.kinds[kind] += 1
            spoiled = self._answer(s, rng, method, kind, rid)
            if spoiled == "closed":
                return

    def _answer(self, s, rng, method, kind, rid):
        """Sends the answer of `kind`; returns what spoiled the connection (None when
        it may carry the next request, 'closed' when it is done)."""
        late = kind.endswith("_late")
        if kind in ("ok", "ok_head"):
            s.sendall(tagged(200, rid, b"" if method == "HEAD" else answer_body(rid),
                             length=len(answer_body(rid))))
            return None
        if kind == "interim":
            s.sendall(rng.choice([CONTINUE, HINTS, CONTINUE + HINTS]))
            time.sleep(0.02)
            s.sendall(tagged(200, rid, answer_body(rid)))
            return None
        if kind == "reset":
            rst_close(s)
            return "closed"
        if kind == "reset_head":
            s.sendall(b"HTTP/1.1 200 OK\r\nX-Answer-To: %s\r\nContent-Le" % rid.encode())
            time.sleep(0.02)
            rst_close(s)
            return "closed"
        if kind in ("101", "1xx"):
            if kind == "101":
                first = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\n"
                         + rng.choice([b"Connection: Upgrade\r\n", b""]) + b"\r\n")
            else:
                first = b"HTTP/1.1 150 Unknown\r\nX-Answer-To: %s\r\n\r\n" % rid.encode()
            if kind == "101" and rng.random() < 0.5:
                s.sendall(first)
                time.sleep(rng.uniform(*STRAY_DELAY))
                s.sendall(EVIL)
            else:
                s.sendall(first + EVIL)
            self._after_refused(s, kind, rid)
            return "closed"
        # bodiless answers with bytes behind them
        if kind.startswith("head"):
            answer, stray, what = tagged(200, rid, length=len(STRAY_BODY)), STRAY_BODY, \
                "a body after its HEAD answer"
        else:
            status = int(kind[:3])
            extra = b"ETag: \"v1\"\r\n" + (b"Content-Length: 0\r\n"
                                           if status == 304 and rng.random() < 0.5 else b"")
            answer, stray, what = tagged(status, rid, extra=extra), EVIL, \
                "a stray response after its %d" % status
        if not late:
            s.sendall(answer + stray)
            return "%s (same write, request %s)" % (what, rid)
        lt = self._late_entry(rid)
        s.sendall(answer)
        time.sleep(rng.uniform(*STRAY_DELAY))
        with lt.lock:
            if lt.state == "pending":
                try:
                    s.sendall(stray)
                    lt.state = "sent"
                except OSError:
                    lt.state = "failed"
            state = lt.state
        lt.event.set()
        if state == "failed":
            return "closed"
        return "%s (%.0f ms later, request %s)" % (what, 1000 * (time.monotonic() - lt.t), rid) \
            if state == "sent" else None

    def _after_refused(self, s, kind, rid):
        """After a 101/1xx the proxy must close the connection: wait (at most 5 s) for
        that; a byte from it meanwhile is a violation."""
        s.settimeout(5.0)
        try:
            d = s.recv(65536)
        except socket.timeout:
            self._violation("the origin connection that answered %s to request %s was still"
                            " open 5 s later" % (kind, rid))
            return
        except OSError:
            return
        if d:
            self._violation("bytes %r arrived on an origin connection after its %s (request"
                            " %s)" % (d[:60], kind, rid))
