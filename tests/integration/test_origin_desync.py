#!/usr/bin/python3
"""A pooled origin connection never carries one request's bytes into another's response
(origin-side response desync), against a raw-socket origin (raw_origin.py).

Every real answer of the origin is tagged with the request's id: the client sends
X-Req-Id: <id>, the origin answers 200 "answer to <id>" with X-Answer-To: <id>. Each
request goes on a new client connection, one after the other, to the case's own origin
host, so the proxy (one worker: one origin pool) reuses its pooled origin connection.
Stray bytes the origin sends carry the markers EVIL / STRAY, which no client may ever see.

1. Bytes after a bodiless response are not served to the next request. The origin
   answers the case's first request with:
     a. HEAD: 200 with Content-Length: N and then N body bytes anyway, in the same write
        as the head, and (b) 0.1 s after it;
     c. 204, then 0.1 s later bytes that look like a complete response
        ("HTTP/1.1 200 OK ... EVIL!"), and (d) the same in the same write as the 204;
     e. 304 with Content-Length: 0, and (f) 304 without it, each followed 0.1 s later
        by such a response.
   The client gets the bodiless response (its own tag, no body byte); 0.25 s later (the
   stray bytes arrived while the connection sat idle in the pool) the next request and
   three more each get their own tagged answer: no stray response, no shift by one.
   (Stray bytes that arrive after the proxy took the connection for a request cannot be
   told apart deterministically: not tested.)
2. An origin connection is not reused after a 101 or an unknown 1xx.
     a. A GET that asked for no upgrade answered "101 Switching Protocols" (Upgrade:
        foo, Connection: Upgrade; and without Connection) and, 0.1 s later, HTTP-looking
        bytes; (b) "150" with a complete response behind it: the client gets 502 with Proxy-Status naming politeproxy, never the
        101 nor the bytes behind it; the next requests get their own tagged answers, the
        first of them on a new origin connection (the old one was closed, not pooled).
     c. 100 Continue, 103 Early Hints, and both, before a 200: the client gets the 200
        with its own tag (interim 100/103 forwarded or not), and so do the next ones.
Every case runs; the failures of all of them are reported together."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from raw_origin import RawOrigin, ok  # noqa: E402

DOMAIN = "desync.test"
# After the first response the client waits IDLE_WAIT before the next request: the stray
# bytes (sent STRAY_DELAY after the response) have arrived while the connection sat idle
# in the pool. Kept short: today's proxy also sweeps its pool once a second, and a sweep
# inside that window hides the bug (a correct proxy passes whatever the timing).
IDLE_WAIT = 0.25
STRAY_DELAY = 0.1
CLIENT_TIMEOUT = 5.0
FOLLOWERS = 4          # requests after the first one, each on a new client connection
MARKERS = (b"EVIL", b"STRAY")
EVIL = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nEVIL!"
STRAY_BODY = b"STRAY-BODY-BYTES-" * 3  # 51 bytes


def tagged_ok(rid):
    return ok(("answer to %s" % rid).encode(), "X-Answer-To: %s\r\n" % rid)


def req_header(req, name):
    for k, v in req["headers"]:
        if k.lower() == name:
            return v
    return None


def make_origin(t, label, first):
    """A keep-alive raw origin: /first is answered with first(rid) (bytes, or a list of
    bytes and floats), every other target with the tagged 200."""
    def handler(req):
        rid = req_header(req, "x-req-id") or "?"
        if req["target"] == "/first":
            return first(rid), "keep"
        return tagged_ok(rid), "keep"
    o = RawOrigin(label, handler)
    t.origins.append(o)
    return o


def origin_conns(o, rid):
    return [r["conn"] for r in o.reqs() if req_header(r, "x-req-id") == rid]


class Reply:
    def __init__(self):
        self.final = None      # the first response with status >= 200, or a 101
        self.interim = []      # statuses of the 1xx before it
        self.raw = b""         # every byte the client received
        self.leftover = b""    # bytes after the final response
        self.error = None

    def __repr__(self):
        return "<final %s interim %s error %s raw %r>" % (
            self.final and self.final.status, self.interim, self.error, self.raw[:300])


def send(t, o, host, rid, method="GET", path="/answer", settle=0.0):
    """One request on a new client connection; reads the response, then listens for
    `settle` more seconds (anything that arrives is leftover)."""
    rep = Reply()
    c = H.RawClient(t.p.port, timeout=CLIENT_TIMEOUT)
    try:
        c.send(("%s http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\nX-Req-Id: %s\r\n\r\n"
                % (method, host, o.port, path, host, o.port, rid)).encode())
        deadline = time.monotonic() + CLIENT_TIMEOUT
        try:
            while True:
                r = c.read_response(timeout=max(0.0, deadline - time.monotonic()),
                                    head_request=(method == "HEAD"))
                if r is None:
                    rep.error = "no complete response within %ss (eof=%s)" % (CLIENT_TIMEOUT, c.eof)
                    break
                if r.status >= 200 or r.status == 101:
                    rep.final = r
                    break
                rep.interim.append(r.status)
        except AssertionError as e:  # not an HTTP status line
            rep.error = str(e)
        end = time.monotonic() + settle
        while c._fill(end):
            pass
        rep.raw, rep.leftover = c.raw, c.buf
    finally:
        c.close()
    return rep


def markers_in(raw):
    return [m.decode() for m in MARKERS if m in raw]


def check_tagged(fails, what, rep, rid):
    """rep is the origin's own tagged 200 for rid, and nothing else."""
    f = rep.final
    if f is None or rep.error:
        fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
        return
    body_want = ("answer to %s" % rid).encode()
    if f.status != 200 or f.header("X-Answer-To") != rid or f.body != body_want:
        fails.append("%s: expected its own answer (200, X-Answer-To: %s, body %r), got %d"
                     " X-Answer-To: %s body %r; raw %r"
                     % (what, rid, body_want, f.status, f.header("X-Answer-To"), f.body[:100],
                        rep.raw[:300]))
    bad = [s for s in rep.interim if s not in (100, 103)]
    if bad:
        fails.append("%s: interim responses %s reached the client" % (what, bad))
    if rep.leftover:
        fails.append("%s: %d byte(s) after the response: %r" % (what, len(rep.leftover),
                                                                rep.leftover[:200]))
    if markers_in(rep.raw):
        fails.append("%s: stray origin bytes (%s) reached the client: %r"
                     % (what, "/".join(markers_in(rep.raw)), rep.raw[:300]))


def followers(t, o, host, label, fails, first=1):
    for i in range(first, first + FOLLOWERS):
        rid = "%s-%d" % (label, i)
        check_tagged(fails, "%s: request %s" % (label, rid), send(t, o, host, rid), rid)


# --------------------------------------------------------------------------------------
# 1. bytes after a bodiless response
# --------------------------------------------------------------------------------------
def head_resp(rid):
    return ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
            "X-Answer-To: %s\r\n\r\n" % (len(STRAY_BODY), rid)).encode()


def status_resp(status, rid, extra=""):
    reason = {204: "No Content", 304: "Not Modified"}[status]
    return ("HTTP/1.1 %d %s\r\nETag: \"v1\"\r\nX-Answer-To: %s\r\n%s\r\n"
            % (status, reason, rid, extra)).encode()


STRAY_CASES = [
    # label, method of the first request, its status, the origin's bytes for it
    ("head-now", "HEAD", 200, lambda rid: head_resp(rid) + STRAY_BODY),
    ("head-late", "HEAD", 200, lambda rid: [head_resp(rid), STRAY_DELAY, STRAY_BODY]),
    ("204-late", "GET", 204, lambda rid: [status_resp(204, rid), STRAY_DELAY, EVIL]),
    ("204-now", "GET", 204, lambda rid: status_resp(204, rid) + EVIL),
    ("304-cl0-late", "GET", 304,
     lambda rid: [status_resp(304, rid, "Content-Length: 0\r\n"), STRAY_DELAY, EVIL]),
    ("304-late", "GET", 304, lambda rid: [status_resp(304, rid), STRAY_DELAY, EVIL]),
]


def stray_case(t, label, method, status, first):
    host = label + "." + DOMAIN
    o = make_origin(t, label, first)
    fails = []
    rid = label + "-0"
    what = "%s: first request %s (%s answered %d)" % (label, rid, method, status)
    rep = send(t, o, host, rid, method=method, path="/first", settle=IDLE_WAIT)
    f = rep.final
    if f is None or rep.error:
        fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
    elif f.status != status or f.header("X-Answer-To") != rid:
        fails.append("%s: got %d X-Answer-To: %s; raw %r"
                     % (what, f.status, f.header("X-Answer-To"), rep.raw[:300]))
    if rep.leftover or markers_in(rep.raw):
        fails.append("%s: body/stray bytes reached the client: leftover %r raw %r"
                     % (what, rep.leftover[:200], rep.raw[:300]))
    followers(t, o, host, label, fails)
    return fails, o


# --------------------------------------------------------------------------------------
# 2. 101 and unknown 1xx: 502, connection not reused; 100 / 103 still work
# --------------------------------------------------------------------------------------
SWITCH = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\n"

REFUSED_CASES = [
    ("101", lambda rid: [SWITCH, STRAY_DELAY, EVIL]),
    ("101-bare", lambda rid: [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\n\r\n",
                              STRAY_DELAY, EVIL]),
    ("150", lambda rid: b"HTTP/1.1 150 Unknown\r\nX-Answer-To: %s\r\n\r\n" % rid.encode() + EVIL),
]


def refused_case(t, label, first):
    host = "status-" + label + "." + DOMAIN
    o = make_origin(t, "status-" + label, first)
    fails = []
    rid = label + "-0"
    what = "%s: GET %s answered %s by the origin" % (label, rid, label)
    rep = send(t, o, host, rid, path="/first", settle=IDLE_WAIT)
    f = rep.final
    if f is None or rep.error:
        fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
    elif f.status != 502 or "politeproxy" not in (f.header("Proxy-Status") or ""):
        fails.append("%s: expected 502 with Proxy-Status naming politeproxy, got %d"
                     " Proxy-Status: %s; raw %r"
                     % (what, f.status, f.header("Proxy-Status"), rep.raw[:300]))
    if (b"HTTP/1.1 101" in rep.raw or [s for s in rep.interim if s not in (100, 103)]
            or markers_in(rep.raw)):
        fails.append("%s: the %s or the bytes behind it reached the client (interim %s): %r"
                     % (what, label, rep.interim, rep.raw[:300]))
    if rep.leftover:
        fails.append("%s: %d byte(s) after the response: %r" % (what, len(rep.leftover),
                                                                rep.leftover[:200]))
    followers(t, o, host, label, fails)
    c0, c1 = origin_conns(o, rid), origin_conns(o, label + "-1")
    if not c0 or not c1 or c1[0] in c0:
        fails.append("%s: the next request was not sent on a new origin connection (the"
                     " %s's connection was reused): %s connection(s) %s, %s-1 on %s; %s"
                     % (label, label, rid, c0, label, c1, o.summary()))
    return fails, o


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"

INTERIM_CASES = [
    ("100", lambda rid: [CONTINUE, 0.05, tagged_ok(rid)]),
    ("103", lambda rid: [HINTS, 0.05, tagged_ok(rid)]),
    ("100+103", lambda rid: [CONTINUE, 0.05, HINTS, 0.05, tagged_ok(rid)]),
]


def interim_case(t, label, first):
    host = "interim-" + label.replace("+", "-") + "." + DOMAIN
    o = make_origin(t, "interim-" + label, first)
    fails = []
    rid = "i" + label + "-0"
    check_tagged(fails, "%s: GET %s answered %s then 200" % (label, rid, label),
                 send(t, o, host, rid, path="/first"), rid)
    followers(t, o, host, "i" + label, fails)
    return fails, o


def test(t):
    cfg = H.base_config(concurrency=2, rate=100, burst=100,
                        timeouts={"response_headers": "4s"})
    # one worker: one origin pool, so sequential client connections share the pooled
    # origin connection (with two, connections alternate between two pools)
    cfg["workers"] = 1
    t.p = t.proxy(cfg)
    cases = ([("1 %s" % c[0], stray_case, c) for c in STRAY_CASES]
             + [("2 %s" % c[0], refused_case, c) for c in REFUSED_CASES]
             + [("2 interim %s" % c[0], interim_case, c) for c in INTERIM_CASES])
    failures = []
    for name, fn, args in cases:
        try:
            fails, o = fn(t, *args)
        except AssertionError as e:
            fails, o = ["%s" % e], None
        if fails:
            H.log("case %s: FAILED (%d):\n    %s" % (name, len(fails), "\n    ".join(fails)))
            failures += ["case %s: %s" % (name, f) for f in fails]
        else:
            H.log("case %s: ok (%s)" % (name, o.summary()))
        H.check(t.p.alive(), "the proxy died during case %s" % name)
    failed_cases = sorted({f.split(":")[0] for f in failures})
    H.check(not failures, "%d of %d cases failed (%s):\n  %s"
            % (len(failed_cases), len(cases), ", ".join(failed_cases), "\n  ".join(failures)))


if __name__ == "__main__":
    H.main(test, timeout=60)
