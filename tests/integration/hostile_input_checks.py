"""One row of the hostile-input table (hostile_input_table.py): the raw origins it is
sent to, sending it on a fresh client connection and observing both ends (Obs), and the
checks, each returning a list of problems: the answer (status, Proxy-Status naming
politeproxy, with "error=" from 400 up), its timing, the close, what reached the origin
(never a request smuggled in a body), and afterwards that a normal GET for the row's
host is served and host_in_flight + host_waiting settle to 0 within 2 s.
Also the proxy the tests send rows to, and the summary of every failing row."""
import collections
import sys
import time

import harness as H
from hostile_input_table import ANSWER_TIMEOUT, ANY, FWD, HEAD_ONLY, HOLD, NOTHING, ORIGIN_BODY, ROWS
from raw_origin import RawOrigin, ok


def answer(req):
    """The raw origins' handler: a small 200; /hold... after HOLD seconds."""
    if req["target"].startswith("/hold"):
        return [HOLD, ok(ORIGIN_BODY)], "keep"
    return ok(ORIGIN_BODY), "keep"


def raw_origin(name):
    # a request stuck half-way is dropped soon; idle pooled connections are kept
    return RawOrigin(name, answer, conn_timeout=ANSWER_TIMEOUT, idle_timeout=30)


Obs = collections.namedtuple("Obs", "resp error elapsed closed extra origin_got origin_reqs"
                             " eof_conns")


def row_host(row):
    """The name "h.test" stands for in this row's bytes: one of its own per row, so a
    host paused by one row's outcome cannot hold up the next."""
    return "r%03d.test" % [r.name for r in ROWS].index(row.name)


def request_bytes(row, port):
    return (row.send.replace(b"{port}", str(port).encode())
            .replace(b"h.test", row_host(row).encode()))


def send(port, data, timeout, head_only=False, wait_close=False):
    """One fresh connection: send, read the final answer, optionally wait for the close.
    Returns (response or None, error, seconds from the last byte sent to the answer,
    closed, bytes after the answer)."""
    c = H.RawClient(port, timeout=5)
    resp = err = elapsed = None
    try:
        c.send(data)
        t_sent = time.monotonic()
        try:
            while True:
                resp = c.read_response(timeout, head_request=head_only)
                if resp is None or resp.status >= 200:
                    break
            if head_only and resp is not None and resp.status >= 300:
                resp.body = read_length_body(c, resp, time.monotonic() + timeout)
        except (AssertionError, OSError, ValueError) as e:
            err = "%s: %s" % (type(e).__name__, e)
        elapsed = time.monotonic() - t_sent
        if resp is None and err is None:
            err = ("the proxy closed the connection after %.2fs" % elapsed if c.eof
                   else "nothing complete within %.1fs" % timeout)
            err += " (received %r, send error %s)" % (c.raw[:200], c.send_error)
        if resp is not None and wait_close:
            deadline = time.monotonic() + 1.0
            while not c.eof and c._fill(deadline):
                pass
        return resp, err, elapsed, c.eof, c.buf
    finally:
        c.close()


def read_length_body(c, resp, deadline):
    """The Content-Length body of a CONNECT refusal (read as a head only)."""
    n = int(resp.header("Content-Length", "0"))
    while len(c.buf) < n and c._fill(deadline):
        pass
    body, c.buf = c.buf[:n], c.buf[n:]
    return body


def run_row(row, port, origin, wait_close=True):
    """Send one row to a proxy (politeproxy or HAProxy) in front of `origin`."""
    mark = origin.mark()
    timeout = max(ANSWER_TIMEOUT, row.within + 0.5) if row.within else ANSWER_TIMEOUT
    resp, err, elapsed, closed, extra = send(
        port, request_bytes(row, origin.port), timeout,
        head_only=row.send.startswith(b"CONNECT"),
        wait_close=wait_close and bool(row.close))
    time.sleep(0.05)  # anything the proxy still forwards arrives now
    got, reqs = origin.since(mark)
    if row.origin == HEAD_ONLY and got:
        H.wait_until(lambda: all(i in origin.eof_at for i in got), 1.0)
    with origin.lock:
        eof_conns = set(origin.eof_at)
    return Obs(resp, err, elapsed, closed, extra, got, reqs, eof_conns)


def describe(obs):
    if obs.resp is None:
        return "no answer (%s)" % obs.error
    return "%d %s" % (obs.resp.status, obs.resp.reason)


def check_answer(row, obs):
    r = obs.resp
    if r is None:
        return ["no answer: %s" % obs.error]
    out = []
    if row.answer == FWD:
        if r.status != 200 or r.body != ORIGIN_BODY:
            out.append("expected the origin's 200 %r, got %d %s body %r"
                       % (ORIGIN_BODY, r.status, r.reason, r.body[:120]))
    elif row.answer != ANY:
        if r.status != row.answer:
            out.append("expected %d from the proxy, got %d %s (body %r)"
                       % (row.answer, r.status, r.reason, r.body[:120]))
        elif r.body == ORIGIN_BODY:
            out.append("the %d came from the origin, not from the proxy" % r.status)
    ps = r.header("Proxy-Status") or ""
    if "politeproxy" not in ps:
        out.append("answer %d has no Proxy-Status with 'politeproxy' (%r)" % (r.status, ps))
    elif r.status >= 400 and "error=" not in ps:
        out.append("answer %d: Proxy-Status without error= (%r)" % (r.status, ps))
    if row.status and row.status not in ps:
        out.append("Proxy-Status %r lacks %r" % (ps, row.status))
    for h in row.headers:
        if r.header(h) is None:
            out.append("answer %d has no %s header (headers %s)" % (r.status, h, r.headers))
    return out


def check_timing(row, obs):
    if row.within and obs.elapsed is not None and obs.elapsed > row.within:
        return ["answered after %.2fs, expected within %.1fs" % (obs.elapsed, row.within)]
    return []


def check_close(row, obs):
    out = []
    if row.close and obs.resp is not None and not obs.closed:
        out.append("the connection stayed open after the %d" % obs.resp.status)
    if row.close and obs.extra:
        out.append("bytes after the answer (a second response?): %r" % obs.extra[:200])
    return out


def head_lines(raw_head):
    return raw_head.decode("latin-1").split("\r\n")[1:]


def check_origin(row, obs, port):
    got, reqs = obs.origin_got, obs.origin_reqs
    out = ["the origin parsed a smuggled request: %r" % r["head"][:100]
           for r in reqs if "smuggled" in r["target"]]
    if row.origin is None:
        return out
    if row.origin == NOTHING:
        if got:
            out.append("%d byte(s) reached the origin, expected none: %r"
                       % (sum(map(len, got.values())), b"".join(got.values())[:300]))
        return out
    if row.origin == HEAD_ONLY:
        if reqs:
            out.append("the origin parsed %d complete request(s) (%r), expected at most"
                       " a head" % (len(reqs), [r["head"][:80] + b"..." + r["body"][:40]
                                                for r in reqs]))
        open_conns = [i for i in got if i not in obs.eof_conns]
        if open_conns:
            out.append("the origin connection that got the head was not closed within 1s"
                       " (received %r)" % got[open_conns[0]][:300])
        return out
    # Seen: exactly one request, these field lines, this body
    if len(reqs) != 1:
        return out + ["the origin parsed %d request(s), expected 1; received %r"
                      % (len(reqs), b"".join(got.values())[:300])]
    req = reqs[0]
    lines = head_lines(req["head"])
    for name, want in row.origin.lines.items():
        want = [w.replace("{port}", str(port)) for w in want]
        seen = [l for l in lines if l.split(":", 1)[0].strip().lower() == name]
        if seen != want:
            out.append("%s lines at the origin: %r, expected %r" % (name, seen, want))
    if row.origin.body is not None:
        raw = got.get(req["conn"], b"").partition(b"\r\n\r\n")[2]
        if raw != row.origin.body:
            out.append("body bytes at the origin %r, expected exactly %r"
                       % (raw[:300], row.origin.body))
    return out


def gauges(proxy):
    m = proxy.metrics()
    return H.msum(m, "politeproxy_host_in_flight") + H.msum(m, "politeproxy_host_waiting")


def check_after(proxy, origin, host):
    """A normal request for the row's host gets the origin's 200, and in_flight +
    waiting settle to 0."""
    out = []
    r = H.request(proxy, "http://%s:%d/after" % (host, origin.port), timeout=2)
    if r.error is not None or r.status != 200 or r.body != ORIGIN_BODY:
        out.append("a normal request for %s afterwards got %r %r" % (host, r, r.body[:100]))
    if not H.wait_until(lambda: gauges(proxy) == 0, 2.0):
        out.append("host_in_flight + host_waiting = %g two seconds after the row"
                   % gauges(proxy))
    return out


def requests_total(proxy):
    return H.msum(proxy.metrics(), "politeproxy_requests_total")


def run_checked(row, proxy, origin):
    """One row against politeproxy, every check. Returns (problems, observation)."""
    before = requests_total(proxy) if row.group == "deny" else None
    obs = run_row(row, proxy.port, origin)
    problems = (check_answer(row, obs) + check_timing(row, obs) + check_close(row, obs)
                + check_origin(row, obs, origin.port))
    if before is not None and requests_total(proxy) != before:
        problems.append("politeproxy_requests_total moved (%g -> %g): a slot was taken"
                        % (before, requests_total(proxy)))
    if not proxy.alive():
        return problems + ["the proxy died"], obs
    return problems + check_after(proxy, origin, row_host(row)), obs


def record(failures, row, problems):
    if problems:
        failures[row.name] = problems
        H.log("FAIL %s: %s" % (row.name, "; ".join(problems)))


def start_proxy(t, origin):
    """The proxy the rows (all but the stall row) go to: 127.0.0.1 is one host key with
    concurrency 1, ::1 an allowed destination, CONNECT allowed to the raw origin's port."""
    cfg = H.base_config(hosts={"127.0.0.1": {"concurrency": 1}}, tls_port=origin.port,
                        concurrency=8, rate=1000, burst=1000)
    cfg["security"]["allow_destinations"].append("::1/128")
    return t.proxy(cfg, "proxy")


def report(failures, title):
    """Every failing row with its problems, under `title`; then the test fails if any."""
    print("\n==== %s ====" % title)
    for name, problems in failures.items():
        print("  %s:\n      %s" % (name, "\n      ".join(problems)))
    sys.stdout.flush()
    H.check(not failures, "%d row(s) failed: %s" % (len(failures), ", ".join(failures)))
