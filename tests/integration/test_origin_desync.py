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
        bytes; (b) "150" with a complete response behind it: the client gets 502 with
        Proxy-Status naming politeproxy, never the 101 nor the bytes behind it; the next
        requests get their own tagged answers, the first of them on a new origin
        connection (the old one was closed, not pooled).
     c. 100 Continue, 103 Early Hints, and both, before a 200: the client gets the 200
        with its own tag (interim 100/103 forwarded or not), and so do the next ones.
Every case runs; the failures of all of them are reported together. Besides the checks
above, politeproxy's outcome (below) must show no stray byte at any client and every
follow-up with its own answer, whatever the differential says.

3. HAProxy differential: every case also runs, with the same client sequence, through
   HAProxy (`haproxy -db`, one thread, one frontend and one backend per case, the
   backend's one server being the case's own raw origin, `http-reuse always`, keep-alive
   to the server: sequential client connections share one pooled server connection, as
   they do in politeproxy with one worker). Each side's outcome per case is, by aspect:
     first answer   what the first client got: the status (with its tag: own, another
                    request's, untagged) after any interim statuses, "relayed 101",
                    or "no answer"
     stray bytes    which clients (#0 the first, #1.. the follow-ups) received a marker
                    (EVIL / STRAY) or bytes after their response; "none"
     follow-ups     "all own" or, per follow-up that did not get its own tagged answer,
                    what it got instead (another request's answer, 502, ...)
     origin conn    whether a follow-up went on the first request's origin connection
                    ("reused" / "not reused") after the misbehaviour
   A table of both sides is printed. A difference not in KNOWN_DIFFERENCES (which pins
   both sides' values and says why), or an entry there that no longer differs as
   recorded, fails the test. Skipped (with the reason printed) when haproxy is not
   installed or does not start.
About 5 s when it passes."""
import collections
import os
import shutil
import socket
import subprocess
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


# --------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------
# name      as reported ("1 head-now")
# kind      stray (1), refused (2 a/b), interim (2 c)
# prefix    of the request ids: <prefix>-0 is the first request, <prefix>-1.. follow
# label     the origin's name; host: its host name
# method    of the first request; status: the answer its client must get (stray cases)
# first     rid -> the origin's bytes for the first request
Case = collections.namedtuple("Case", "name kind prefix label host method status first")


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

SWITCH = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\n"

REFUSED_CASES = [
    ("101", lambda rid: [SWITCH, STRAY_DELAY, EVIL]),
    ("101-bare", lambda rid: [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\n\r\n",
                              STRAY_DELAY, EVIL]),
    ("150", lambda rid: b"HTTP/1.1 150 Unknown\r\nX-Answer-To: %s\r\n\r\n" % rid.encode() + EVIL),
]

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"

INTERIM_CASES = [
    ("100", lambda rid: [CONTINUE, 0.05, tagged_ok(rid)]),
    ("103", lambda rid: [HINTS, 0.05, tagged_ok(rid)]),
    ("100+103", lambda rid: [CONTINUE, 0.05, HINTS, 0.05, tagged_ok(rid)]),
]

CASES = ([Case("1 " + label, "stray", label, label, label + "." + DOMAIN, method, status,
               first) for label, method, status, first in STRAY_CASES]
         + [Case("2 " + label, "refused", label, "status-" + label,
                 "status-" + label + "." + DOMAIN, "GET", None, first)
            for label, first in REFUSED_CASES]
         + [Case("2 interim " + label, "interim", "i" + label, "interim-" + label,
                 "interim-" + label.replace("+", "-") + "." + DOMAIN, "GET", 200, first)
            for label, first in INTERIM_CASES])

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


# --------------------------------------------------------------------------------------
# politeproxy's contract
# --------------------------------------------------------------------------------------
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


def expect(case, run, o):
    """The failures of politeproxy's run of a case."""
    fails = []
    label, rid = case.prefix, case.prefix + "-0"
    rep, f = run.first, run.first.final
    if case.kind == "stray":
        # 1. the bodiless response, its own, and no byte behind it
        what = "%s: first request %s (%s answered %d)" % (label, rid, case.method, case.status)
        if f is None or rep.error:
            fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
        elif f.status != case.status or f.header("X-Answer-To") != rid:
            fails.append("%s: got %d X-Answer-To: %s; raw %r"
                         % (what, f.status, f.header("X-Answer-To"), rep.raw[:300]))
        if rep.leftover or markers_in(rep.raw):
            fails.append("%s: body/stray bytes reached the client: leftover %r raw %r"
                         % (what, rep.leftover[:200], rep.raw[:300]))
    elif case.kind == "refused":
        # 2 a/b. a 502 of politeproxy's own, nothing of the 101 / 150 or behind it
        what = "%s: GET %s answered %s by the origin" % (label, rid, label)
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
    else:
        # 2 c. the 200 after the interim responses, its own
        check_tagged(fails, "%s: GET %s answered %s then 200" % (label[1:], rid, label[1:]),
                     rep, rid)
    for frid, frep in run.follow:
        check_tagged(fails, "%s: request %s" % (label, frid), frep, frid)
    if case.kind == "refused":
        c0, c1 = origin_conns(o, rid), origin_conns(o, label + "-1")
        if not c0 or not c1 or c1[0] in c0:
            fails.append("%s: the next request was not sent on a new origin connection (the"
                         " %s's connection was reused): %s connection(s) %s, %s-1 on %s; %s"
                         % (label, label, rid, c0, label, c1, o.summary()))
    # whatever the differential says: no stray byte and no other request's answer
    oc = outcome(case, run, o)
    if oc["stray bytes"] != "none":
        fails.append("%s: outcome: stray bytes reached client(s): %s" % (label, oc["stray bytes"]))
    if oc["follow-ups"] != "all own":
        fails.append("%s: outcome: follow-ups did not all get their own answer: %s"
                     % (label, oc["follow-ups"]))
    return fails


# --------------------------------------------------------------------------------------
# outcomes, to compare two proxies
# --------------------------------------------------------------------------------------
ASPECTS = ("first answer", "stray bytes", "follow-ups", "origin conn")


def index_of(case, tag):
    """'#k' for the request id <prefix>-k, else the tag itself."""
    if tag and tag.startswith(case.prefix + "-") and tag[len(case.prefix) + 1:].isdigit():
        return "#" + tag[len(case.prefix) + 1:]
    return tag


def answer(case, rep, rid):
    """What one client got, in short: '502', '204 own', '200 answer to #1',
    '200 untagged (EVIL)', 'relayed 101', '[100,103] 200 own', 'no answer'."""
    f = rep.final
    pre = "[%s] " % ",".join(map(str, rep.interim)) if rep.interim else ""
    if f is None or rep.error:
        return pre + "no answer"
    if f.status == 101:
        return pre + "relayed 101"
    tag = f.header("X-Answer-To")
    if tag == rid:
        what = " own"
    elif tag:
        what = " answer to " + index_of(case, tag)
    elif f.status < 400:
        what = " untagged"
    else:
        what = ""
    marks = markers_in(f.body)
    return "%s%d%s%s" % (pre, f.status, what, " (%s)" % "/".join(marks) if marks else "")


def outcome(case, run, o):
    """{aspect: value} of one side's run of a case (see the docstring)."""
    rid0 = case.prefix + "-0"
    stray = []
    for i, (rid, rep) in enumerate([(rid0, run.first)] + run.follow):
        bad = markers_in(rep.raw)
        if rep.leftover and not bad:
            bad = ["%d byte(s) after the response" % len(rep.leftover)]
        if bad:
            stray.append("#%d %s" % (i, "/".join(bad)))
    others = ["#%s %s" % (index_of(case, rid)[1:], answer(case, rep, rid))
              for rid, rep in run.follow if answer(case, rep, rid) != "200 own"]
    c0 = set(origin_conns(o, rid0))
    later = [c for rid, _ in run.follow for c in origin_conns(o, rid)]
    if not c0:
        conn = "first request not at the origin"
    else:
        conn = "reused" if c0 & set(later) else "not reused"
    return collections.OrderedDict([
        ("first answer", answer(case, run.first, rid0)),
        ("stray bytes", ", ".join(stray) or "none"),
        ("follow-ups", ", ".join(others) or "all own"),
        ("origin conn", conn),
    ])


# --------------------------------------------------------------------------------------
# the HAProxy differential
# --------------------------------------------------------------------------------------
# (case name, aspect) -> (politeproxy's value, HAProxy 2.6's value, why they differ).
# A difference not listed here fails the test, and so does an entry that no longer
# differs exactly as recorded.
_INTERIM = ("RFC 9110 15.2: a proxy MUST forward 1xx responses it did not ask for. HAProxy"
            " relays the 100/103, politeproxy drops them and sends the final 200 only"
            " (harmless to clients, which must cope without 1xx, but Early Hints are lost):"
            " HAProxy conforms, no desync either way.")
KNOWN_DIFFERENCES = {
    ("2 150", "first answer"): (
        "502", "[150] 200 untagged (EVIL)",
        "An unknown 1xx is interim (RFC 9110 15.2): HAProxy relays the 150, then the 200"
        " behind it as request #0's final answer; politeproxy refuses an unknown 1xx (502,"
        " connection closed). Both are safe; HAProxy follows 15.2 to the letter."),
    ("2 150", "stray bytes"): (
        "none", "#0 EVIL",
        "Same cause: for HAProxy the EVIL 200 after the 150 is request #0's own final"
        " response and goes to #0 only (no follow-up gets it); politeproxy drops it."),
    ("2 150", "origin conn"): (
        "not reused", "reused",
        "Same cause: HAProxy read a complete 150 + 200 exchange, so its connection is in"
        " sync and pooled; politeproxy closes the connection it refused."),
    ("2 interim 100", "first answer"): ("200 own", "[100] 200 own", _INTERIM),
    ("2 interim 103", "first answer"): ("200 own", "[103] 200 own", _INTERIM),
    ("2 interim 100+103", "first answer"): ("200 own", "[100,103] 200 own", _INTERIM),
}

HAPROXY_GLOBAL = """global
  maxconn 200
  nbthread 1
defaults
  mode http
  option http-keep-alive
  timeout connect 2s
  timeout client 5s
  timeout server 4s
  timeout http-request 2s
  timeout http-keep-alive 2s
"""

HAPROXY_CASE = """frontend fe%(i)d
  bind 127.0.0.1:%(port)d
  default_backend be%(i)d
backend be%(i)d
  http-reuse always
  server origin 127.0.0.1:%(origin)d
"""


def start_haproxy(t, exe, origins):
    """HAProxy with one frontend per case, in front of that case's origin:
    (process, [port per case]) or (None, reason)."""
    # Distinct ports: free_port() may hand out a number twice, and HAProxy binds with
    # SO_REUSEPORT, so two frontends on one port would share its connections (one case's
    # requests reaching another case's origin).
    taken = {o.port for o in origins}
    ports = []
    while len(ports) < len(origins):
        port = H.free_port()
        if port not in taken:
            taken.add(port)
            ports.append(port)
    cfg = os.path.join(t.workdir, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(HAPROXY_GLOBAL + "".join(HAPROXY_CASE % {"i": i, "port": port, "origin": o.port}
                                         for i, (port, o) in enumerate(zip(ports, origins))))
    log = os.path.join(t.workdir, "haproxy.log")
    with open(log, "wb") as f:
        p = subprocess.Popen([exe, "-db", "-f", cfg], stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT, preexec_fn=H._pdeathsig)
    t.haproxy_proc = p

    def up():
        if p.poll() is not None:
            return True
        for port in ports:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                return False
        return True
    H.wait_until(up, 5)
    if p.poll() is not None or not up():
        with open(log, "rb") as f:
            return None, "haproxy did not start (exit %s): %s" % (p.poll(), f.read()[-500:])
    H.log("haproxy %d: %d frontends on 127.0.0.1, one per case" % (p.pid, len(ports)))
    return p, ports


def compare(pp, ha):
    """Print both sides per case; return the problems (unknown differences, stale or
    changed KNOWN_DIFFERENCES entries)."""
    problems = []
    width = max(len(c.name) for c in CASES)
    print("\n==== origin desync: politeproxy | haproxy ====", flush=True)
    for case in CASES:
        if case.name not in pp or case.name not in ha:
            continue
        print("case %s" % case.name)
        for aspect in ASPECTS:
            a, b = pp[case.name][aspect], ha[case.name][aspect]
            key = (case.name, aspect)
            known = KNOWN_DIFFERENCES.get(key)
            if a == b:
                mark = ""
                if known:
                    problems.append("%s / %s: in KNOWN_DIFFERENCES but both now %r"
                                    % (case.name, aspect, a))
                    mark = "  <- STALE known difference"
            elif known is None:
                mark = "  <- DIFF, NOT in KNOWN_DIFFERENCES"
                problems.append("%s / %s: politeproxy %r, haproxy %r (not in"
                                " KNOWN_DIFFERENCES)" % (case.name, aspect, a, b))
            elif (a, b) != known[:2]:
                mark = "  <- DIFF, but KNOWN_DIFFERENCES has %r / %r" % known[:2]
                problems.append("%s / %s: politeproxy %r, haproxy %r; KNOWN_DIFFERENCES"
                                " recorded %r / %r" % ((case.name, aspect, a, b) + known[:2]))
            else:
                mark = "  <- known: " + known[2]
            print("  %-13s %-*s | %s%s" % (aspect, max(width, 28), a, b, mark))
    sys.stdout.flush()
    names = {c.name for c in CASES}
    for key in KNOWN_DIFFERENCES:
        if key[0] not in names or key[1] not in ASPECTS:
            problems.append("%s / %s: in KNOWN_DIFFERENCES but there is no such case and"
                            " aspect" % key)
    return problems


# --------------------------------------------------------------------------------------
# the test
# --------------------------------------------------------------------------------------
def run_side(side, ports, origins, on_case):
    """Every case, one after the other, through the proxy port of the case (ports[i]
    for CASES[i]) in front of the case's origin (origins[i]); on_case(case, run, origin)
    after each. Returns the names of the cases not started within SIDE_BUDGET."""
    deadline = time.monotonic() + SIDE_BUDGET
    not_run = []
    for case, port, o in zip(CASES, ports, origins):
        if time.monotonic() >= deadline:
            not_run.append(case.name)
            continue
        on_case(case, exchange(port, case, o, deadline), o)
    if not_run:
        H.log("%s: cases not run (the ones before took over %gs): %s"
              % (side, SIDE_BUDGET, ", ".join(not_run)))
    return not_run


def test(t):
    t.haproxy_proc = None
    cfg = H.base_config(concurrency=2, rate=100, burst=100,
                        timeouts={"response_headers": "4s"})
    # one worker: one origin pool, so sequential client connections share the pooled
    # origin connection (with two, connections alternate between two pools)
    cfg["workers"] = 1
    t.p = t.proxy(cfg)
    pp_origins = [make_origin(t, c.label, c.first) for c in CASES]
    failures = []
    pp_out = {}

    def pp_case(case, run, o):
        fails = expect(case, run, o)
        pp_out[case.name] = outcome(case, run, o)
        if fails:
            H.log("case %s: FAILED (%d):\n    %s" % (case.name, len(fails), "\n    ".join(fails)))
            failures.extend("case %s: %s" % (case.name, f) for f in fails)
        else:
            H.log("case %s: ok (%s)" % (case.name, o.summary()))
        H.check(t.p.alive(), "the proxy died during case %s" % case.name)

    for name in run_side("politeproxy", [t.p.port] * len(CASES), pp_origins, pp_case):
        failures.append("case %s: not run (time budget)" % name)

    try:
        exe = shutil.which("haproxy")
        if exe:
            ha_origins = [make_origin(t, "haproxy-" + c.label, c.first) for c in CASES]
            ha, ha_ports = start_haproxy(t, exe, ha_origins)
        else:
            ha, ha_ports = None, "haproxy is not installed (Debian package haproxy)"
        if ha is None:
            print("SKIP haproxy differential: %s" % ha_ports, flush=True)
        else:
            ha_out = {}

            def ha_case(case, run, o):
                ha_out[case.name] = outcome(case, run, o)
                H.log("haproxy case %s: %s (%s)" % (case.name, dict(ha_out[case.name]),
                                                    o.summary()))
            # the same sequence; each case has its own frontend (and port)
            for name in run_side("haproxy", ha_ports, ha_origins, ha_case):
                failures.append("haproxy differential: case %s not run (time budget)" % name)
            failures.extend("haproxy differential: " + p for p in compare(pp_out, ha_out))
    finally:
        p = t.haproxy_proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(5)
    failed_cases = sorted({f.split(":")[0] for f in failures})
    H.check(not failures, "%d failure(s) in %s (of %d cases):\n  %s"
            % (len(failures), ", ".join(failed_cases), len(CASES), "\n  ".join(failures)))


if __name__ == "__main__":
    H.main(test, timeout=55)
