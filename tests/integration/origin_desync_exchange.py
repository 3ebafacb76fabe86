"""The client and origin sides of the origin-desync tests (test_origin_desync_bodiless.py,
test_origin_desync_1xx.py).

Every real answer of the origin is tagged with the request's id: the client sends
X-Req-Id: <id>, the origin answers 200 "answer to <id>" with X-Answer-To: <id>. Each
request goes on a new client connection, one after the other, to the case's own origin
host, so the proxy (one worker: one origin pool) reuses its pooled origin connection.
Stray bytes the origin sends carry the markers EVIL / STRAY, which no client may ever see.

A Case names the origin's misbehaviour on the first request; exchange() sends that
first request and FOLLOWERS tagged ones behind it, and returns a Run of the Replies."""
import collections
import time

import harness as H
from raw_origin import RawOrigin, ok

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
# A side (politeproxy, HAProxy) sends no request after this many seconds (the ones not
# sent are failures): even when every request times out, each side ends within one
# request's CLIENT_TIMEOUT of it, well inside the ctest TIMEOUT.
SIDE_BUDGET = 20.0


def tagged_ok(rid):
    return ok(("answer to %s" % rid).encode(), "X-Answer-To: %s\r\n" % rid)


def req_header(req, name):
    for k, v in req["headers"]:
        if k.lower() == name:
            return v
    return None


def target_path(target):
    """The path of an origin-form or absolute-form target (HAProxy forwards the
    absolute form as the client sent it)."""
    if "://" in target:
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    return target.partition("?")[0]


def make_origin(t, label, first):
    """A keep-alive raw origin: /first is answered with first(rid) (bytes, or a list of
    bytes and floats), every other target with the tagged 200."""
    def handler(req):
        rid = req_header(req, "x-req-id") or "?"
        if target_path(req["target"]) == "/first":
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


def send(port, o, host, rid, method="GET", path="/answer", settle=0.0):
    """One request on a new client connection to the proxy on `port`; reads the
    response, then listens for `settle` more seconds (anything that arrives is
    leftover)."""
    rep = Reply()
    c = H.RawClient(port, timeout=CLIENT_TIMEOUT)
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


# name      as reported ("1 head-now")
# kind      stray (1), refused (2 a/b), interim (2 c)
# prefix    of the request ids: <prefix>-0 is the first request, <prefix>-1.. follow
# label     the origin's name; host: its host name
# method    of the first request; status: the answer its client must get (stray cases)
# first     rid -> the origin's bytes for the first request
Case = collections.namedtuple("Case", "name kind prefix label host method status first")

Run = collections.namedtuple("Run", "first follow")  # Reply, [(rid, Reply)]


def not_sent():
    rep = Reply()
    rep.error = "not sent: the side's time budget (%gs) was spent" % SIDE_BUDGET
    return rep


def exchange(port, case, o, deadline):
    """The client sequence of a case through the proxy on `port`: the first request
    (answered by case.first), then FOLLOWERS tagged requests, each on a new client
    connection, one after the other; none is sent after `deadline`."""
    settle = 0.0 if case.kind == "interim" else IDLE_WAIT
    first = send(port, o, case.host, case.prefix + "-0", method=case.method,
                 path="/first", settle=settle)
    follow = []
    for i in range(1, 1 + FOLLOWERS):
        rid = "%s-%d" % (case.prefix, i)
        follow.append((rid, send(port, o, case.host, rid)
                       if time.monotonic() < deadline else not_sent()))
    return Run(first, follow)
