#!/usr/bin/python3
"""Entry checks: what a request must pass before it is forwarded, on every way in
(HTTP/1.1 absolute-form, CONNECT, h2c prior knowledge). Each case is named; every
failing case is collected and the summary lists them all, then the test fails.

A  Content-Length between 2^63 and 2^64-1 (9223372036854775808, 10^19,
   18446744073709551615) on a POST: 400 with Proxy-Status (politeproxy; error=), the
   connection closed, no byte at the origin. A0: 2^63-1 itself is a framing the proxy
   accepts: no 400, the head reaches the origin with that Content-Length.
B  One 70 KB header field behind a short request line (limits.request_header_bytes
   65536): 431, not 414; no byte at the origin.
C  150 header fields on an h2c stream (limits.request_header_fields 100): 431 as over
   HTTP/1.1 (also checked), no byte at the origin.
D  h2c OPTIONS: D1 Max-Forwards 0 is answered by the proxy itself with the status
   HTTP/1.1 gets (200 with Allow), nothing at the origin; D2 Max-Forwards 3 reaches the
   origin as Max-Forwards 2.
E  The proxy's own listeners are no destination, whatever the allow list: GET to the
   admin port (127.0.0.1, 127.1, 2130706433, [::ffff:127.0.0.1], a name resolving to
   127.0.0.1), GET to the proxy port, CONNECT to either (both in connect_ports): 403
   with Proxy-Status error=.
F  An HTTP/2 connection error (PING on stream 1: PROTOCOL_ERROR): GOAWAY, then the
   TCP connection closes within 2 s (RFC 9113 5.4.1), not after timeouts.idle.
G  With security.users_file: an h2c TRACE and an h2c CONNECT without credentials get
   the method refusal (TRACE: the status HTTP/1.1 gives, 405; CONNECT: 400), not 407;
   nothing at the origin. With credentials the same answers (control).
H  One entry judge, one order (policy/entry_rules.hpp), on both protocols: H1 a denied
   destination (the proxy's own admin port) without credentials is 403, not 407 (the
   destination is judged before the credentials: a refused request costs no hash), on
   HTTP/1.1 and h2c, and a CONNECT to a port outside connect_ports likewise; H2 TRACE with 150 fields is 405 on both (the method before the
   field count); H3 OPTIONS * is answered by the proxy on both (200 with Allow).
Every origin is a raw origin of its own (raw_origin.py), so "no byte" is exact."""
import base64
import hashlib
import os
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from raw_origin import RawOrigin, ok  # noqa: E402
from test_h2c import H2Client  # noqa: E402

ORIGIN_BODY = b"origin-ok"
ANSWER_WAIT = 2.5  # seconds for an answer the proxy gives itself
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------
def new_origin(t, name):
    o = RawOrigin(name, lambda req: (ok(ORIGIN_BODY), "keep"), conn_timeout=5, idle_timeout=30)
    t.stores.append(o)  # stopped at cleanup
    return o


def raw_exchange(port, data, timeout=ANSWER_WAIT, head_only=False, settle=0.0):
    """Send data on a fresh connection; (response or None, error, closed, extra bytes).
    With settle > 0, waits that long after the answer for the close."""
    c = H.RawClient(port, timeout=5)
    try:
        c.send(data)
        try:
            resp = c.read_response(timeout, head_request=head_only)
        except (H.TestFailure, OSError) as e:
            return None, str(e), False, b""
        closed, extra = False, b""
        if resp is not None and settle > 0:
            deadline = time.monotonic() + settle
            while c._fill(deadline):
                pass
            closed, extra = c.eof, c.buf
        err = c.send_error or ("no complete answer within %.1fs" % timeout if resp is None else None)
        return resp, err, closed, extra
    finally:
        c.close()


def own_answer(resp, status, what, err=None):
    """Problems unless resp is the proxy's own answer with this status."""
    if resp is None:
        return ["%s: no answer (%s), expected %d" % (what, err, status)]
    ps = resp.header("Proxy-Status") or ""
    if resp.status != status:
        return ["%s: expected %d, got %d %s (Proxy-Status %r, body %r)"
                % (what, status, resp.status, resp.reason, ps, (resp.body or b"")[:100])]
    out = []
    if "politeproxy" not in ps or (status >= 400 and "error=" not in ps):
        out.append("%s: Proxy-Status %r, expected 'politeproxy; error=...'" % (what, ps))
    if "queue-wait=" in ps or (resp.body or b"") == ORIGIN_BODY:
        out.append("%s: the answer came through from a destination (Proxy-Status %r)" % (what, ps))
    return out


def nothing_at(origin, what, settle=0.3):
    time.sleep(settle)
    got = origin.all_received()
    return ["%s: %d byte(s) reached the origin: %r" % (what, len(got), got[:200])] if got else []


def h2_own_answer(r, status, what):
    """The same for an h2c stream's record (test_h2c.H2Client.responses[sid])."""
    if r["status"] is None:
        return ["%s: no response (reset %r, ended %r), expected %d" % (what, r["reset"], r["ended"], status)]
    ps = r["headers"].get("proxy-status", "")
    if r["status"] != status:
        return ["%s: expected %d, got %d (proxy-status %r, body %r)" % (what, status, r["status"], ps, r["body"][:100])]
    out = []
    if "politeproxy" not in ps or (status >= 400 and "error=" not in ps):
        out.append("%s: proxy-status %r, expected 'politeproxy; error=...'" % (what, ps))
    if "queue-wait=" in ps or r["body"] == ORIGIN_BODY:
        out.append("%s: the answer came from the origin (proxy-status %r)" % (what, ps))
    return out


def h2_one(port, authority, path, method="GET", headers=(), fields=None, timeout=ANSWER_WAIT + 1):
    """One h2c stream on a fresh connection: its record (status, headers, body...)."""
    c = H2Client(port)
    try:
        if fields is None:
            sid = c.request(authority, path, method=method, headers=headers)
        else:  # exact fields (CONNECT: :method and :authority alone)
            sid = c.conn.get_next_available_stream_id()
            c.conn.config.validate_outbound_headers = False  # python3-h2 wants :path even on CONNECT
            c.conn.send_headers(sid, list(fields) + list(headers), end_stream=True)
            c.conn.config.validate_outbound_headers = True
            c.responses[sid] = {"status": None, "headers": {}, "body": b"", "ended": False, "reset": None}
            c.flush()
        c.pump(c.done([sid]), timeout)
        return c.responses[sid]
    finally:
        c.close()


def req_bytes(method, target, host, *fields, body=b""):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: " + host] + list(fields)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# --------------------------------------------------------------------------------------
# the cases: each returns a list of problems
# --------------------------------------------------------------------------------------
def case_a(t, proxy, value, idx):
    o = new_origin(t, "a%d" % idx)
    host = "cl%d.test:%d" % (idx, o.port)
    what = "POST with Content-Length %s" % value
    resp, err, closed, extra = raw_exchange(
        proxy.port, req_bytes("POST", "http://%s/" % host, host, "Content-Length: " + value, body=b"hello"),
        settle=1.0)
    out = own_answer(resp, 400, what, err)
    if resp is not None and not closed:
        out.append("%s: the connection stayed open after the %d" % (what, resp.status))
    return out + nothing_at(o, what)


def case_a0(t, proxy):
    o = new_origin(t, "a0")
    host = "cl0.test:%d" % o.port
    value = str(2 ** 63 - 1)
    c = H.RawClient(proxy.port, timeout=5)
    try:
        c.send(req_bytes("POST", "http://%s/" % host, host, "Content-Length: " + value, body=b"hello"))
        got_head = H.wait_until(lambda: b"\r\n\r\n" in o.all_received(), 2.0)
        try:
            resp = c.read_response(0.3)  # a refusal would have come by now
        except (H.TestFailure, OSError):
            resp = None
    finally:
        c.close()
    out = []
    if resp is not None and resp.status == 400:
        out.append("Content-Length 2^63-1 refused with 400 (%s)" % resp.header("Proxy-Status"))
    if not got_head:
        out.append("Content-Length 2^63-1: the head did not reach the origin within 2 s (answer %r)" % resp)
    else:
        head = o.all_received().partition(b"\r\n\r\n")[0].decode("latin-1").lower()
        if "content-length: " + value not in head:
            out.append("Content-Length 2^63-1: the origin's head lacks 'content-length: %s': %r" % (value, head[:400]))
    return out


def case_b(t, proxy):
    o = new_origin(t, "b")
    host = "big.test:%d" % o.port
    what = "one 70 KB header field"
    resp, err, _, _ = raw_exchange(proxy.port, req_bytes("GET", "http://%s/" % host, host, "X-Big: " + "b" * 70000))
    return own_answer(resp, 431, what, err) + nothing_at(o, what)


def case_c(t, proxy):
    o = new_origin(t, "c")
    host = "many.test:%d" % o.port
    fields = [("x-f%03d" % i, "v") for i in range(150)]
    out = []
    # control: HTTP/1.1 answers 431 to the same
    resp, err, _, _ = raw_exchange(proxy.port, req_bytes("GET", "http://%s/h1" % host, host,
                                                         *["%s: %s" % f for f in fields]))
    out += ["(HTTP/1.1 control) " + p for p in own_answer(resp, 431, "150 fields over HTTP/1.1", err)]
    r = h2_one(proxy.port, host, "/h2", headers=fields)
    return out + h2_own_answer(r, 431, "150 fields on an h2c stream") + nothing_at(o, "150 fields")


def case_d1(t, proxy):
    o = new_origin(t, "d1")
    host = "mf0.test:%d" % o.port
    resp, err, _, _ = raw_exchange(proxy.port, req_bytes("OPTIONS", "http://%s/" % host, host, "Max-Forwards: 0"))
    if resp is None:
        return ["HTTP/1.1 OPTIONS Max-Forwards 0: no answer (%s)" % err]
    h1_status = resp.status
    H.log("HTTP/1.1 OPTIONS Max-Forwards 0 -> %d, Allow %r" % (h1_status, resp.header("Allow")))
    out = nothing_at(o, "(HTTP/1.1 control) OPTIONS Max-Forwards 0")
    r = h2_one(proxy.port, host, "/", method="OPTIONS", headers=[("max-forwards", "0")])
    out += h2_own_answer(r, h1_status, "h2c OPTIONS Max-Forwards 0 (HTTP/1.1 gets %d)" % h1_status)
    if r["status"] is not None and "allow" not in r["headers"]:
        out.append("h2c OPTIONS Max-Forwards 0: no allow field (%s)" % r["headers"])
    return out + nothing_at(o, "h2c OPTIONS Max-Forwards 0")


def case_d2(t, proxy):
    o = new_origin(t, "d2")
    host = "mf3.test:%d" % o.port
    r = h2_one(proxy.port, host, "/", method="OPTIONS", headers=[("max-forwards", "3")])
    out = []
    if r["status"] != 200 or r["body"] != ORIGIN_BODY:
        out.append("h2c OPTIONS Max-Forwards 3: expected the origin's 200, got %s %r" % (r["status"], r["body"][:120]))
    reqs = o.reqs()
    if len(reqs) != 1:
        return out + ["h2c OPTIONS Max-Forwards 3: the origin parsed %d requests" % len(reqs)]
    mf = [v for k, v in reqs[0]["headers"] if k.lower() == "max-forwards"]
    if mf != ["2"]:
        out.append("h2c OPTIONS Max-Forwards 3: the origin saw Max-Forwards %s, expected ['2']" % mf)
    return out


def case_e(t, proxy):
    out = []
    ap, pp = proxy.admin_port, proxy.port
    gets = [("127.0.0.1", ap, "/hosts"), ("127.1", ap, "/hosts"), ("2130706433", ap, "/hosts"),
            ("[::ffff:127.0.0.1]", ap, "/hosts"), ("admin.test", ap, "/hosts"),
            ("127.0.0.1", pp, "/"), ("127.1", pp, "/")]
    for h, port, path in gets:
        hp = "%s:%d" % (h, port)
        what = "GET http://%s%s (%s port)" % (hp, path, "admin" if port == ap else "proxy")
        resp, err, _, _ = raw_exchange(pp, req_bytes("GET", "http://%s%s" % (hp, path), hp, "Connection: close"))
        out += own_answer(resp, 403, what, err)
    for h, port in (("127.0.0.1", ap), ("admin.test", ap), ("127.0.0.1", pp)):
        hp = "%s:%d" % (h, port)
        what = "CONNECT %s (%s port)" % (hp, "admin" if port == ap else "proxy")
        resp, err, _, _ = raw_exchange(pp, req_bytes("CONNECT", hp, hp), head_only=True)
        if resp is not None and resp.status != 403:
            out.append("%s: expected 403, got %d %s" % (what, resp.status, resp.reason))
        elif resp is None:
            out.append("%s: no answer (%s)" % (what, err))
        elif "error=" not in (resp.header("Proxy-Status") or ""):
            out.append("%s: 403 without Proxy-Status error= (%r)" % (what, resp.header("Proxy-Status")))
    return out


def case_f(t, proxy):
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    try:
        settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
        ping_on_stream_1 = b"\x00\x00\x08\x06\x00\x00\x00\x00\x01" + b"12345678"
        s.sendall(PREFACE + settings + ping_on_stream_1)
        t0 = time.monotonic()
        data, closed, closed_at = b"", False, None
        s.settimeout(0.2)
        while time.monotonic() - t0 < 3.0:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                closed, closed_at = True, time.monotonic() - t0
                break
            data += chunk
    finally:
        s.close()
    goaway, i = None, 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if data[i + 3] == 7 and i + 17 <= len(data):
            goaway = int.from_bytes(data[i + 13:i + 17], "big")
        i += 9 + n
    out = []
    if goaway != 1:
        out.append("PING on stream 1: GOAWAY error code %r, expected PROTOCOL_ERROR (1)" % goaway)
    if not closed or closed_at > 2.0:
        out.append("PING on stream 1: the connection %s after the GOAWAY (expected a close within 2 s)"
                   % ("was still open 3 s" if not closed else "closed only %.2f s" % closed_at))
    return out


def case_g(t, users, origin_name):
    o = new_origin(t, origin_name)
    host = "g.test:%d" % o.port
    auth = [("proxy-authorization", "Basic " + base64.b64encode(b"crawler:pw").decode())]
    out = []
    resp, err, _, _ = raw_exchange(users.port, req_bytes("TRACE", "http://%s/" % host, host))
    if resp is None:
        return ["HTTP/1.1 TRACE without credentials: no answer (%s)" % err]
    h1 = resp.status
    H.log("HTTP/1.1 TRACE without credentials (users_file set) -> %d" % h1)
    if h1 != 405:
        out.append("(HTTP/1.1 control) TRACE without credentials got %d, expected 405" % h1)
    r = h2_one(users.port, host, "/", method="TRACE")
    out += h2_own_answer(r, h1, "h2c TRACE without credentials (HTTP/1.1 gets %d)" % h1)
    r = h2_one(users.port, None, None, fields=[(":method", "CONNECT"), (":authority", host)])
    out += h2_own_answer(r, 400, "h2c CONNECT without credentials")
    # control: with credentials, the same answers (today's behaviour too)
    r = h2_one(users.port, host, "/", method="TRACE", headers=auth)
    out += ["(control) " + p for p in h2_own_answer(r, 405, "h2c TRACE with credentials")]
    r = h2_one(users.port, None, None, fields=[(":method", "CONNECT"), (":authority", host)], headers=auth)
    out += ["(control) " + p for p in h2_own_answer(r, 400, "h2c CONNECT with credentials")]
    return out + nothing_at(o, "TRACE / CONNECT")


def case_h1(t, users):
    target = "127.0.0.1:%d" % users.admin_port
    resp, err, _, _ = raw_exchange(users.port, req_bytes("GET", "http://%s/" % target, target))
    out = own_answer(resp, 403, "HTTP/1.1 GET to a denied destination without credentials", err)
    r = h2_one(users.port, target, "/")
    out += h2_own_answer(r, 403, "h2c GET to a denied destination without credentials")
    # a CONNECT too: its port (not in connect_ports) is judged before the credentials
    resp, err, _, _ = raw_exchange(users.port, req_bytes("CONNECT", target, target))
    return out + own_answer(resp, 403, "CONNECT to a port outside connect_ports without credentials", err)


def case_h2(t, proxy):
    o = new_origin(t, "h2")
    host = "trace-many.test:%d" % o.port
    fields = [("x-f%03d" % i, "v") for i in range(150)]
    resp, err, _, _ = raw_exchange(proxy.port, req_bytes("TRACE", "http://%s/" % host, host,
                                                         *["%s: %s" % f for f in fields]))
    out = own_answer(resp, 405, "HTTP/1.1 TRACE with 150 fields", err)
    r = h2_one(proxy.port, host, "/", method="TRACE", headers=fields)
    return out + h2_own_answer(r, 405, "h2c TRACE with 150 fields") + nothing_at(o, "TRACE with 150 fields")


def case_h3(t, proxy):
    o = new_origin(t, "h3")
    host = "asterisk.test:%d" % o.port
    resp, err, _, _ = raw_exchange(proxy.port, req_bytes("OPTIONS", "*", host))
    out = own_answer(resp, 200, "HTTP/1.1 OPTIONS *", err)
    r = h2_one(proxy.port, host, "*", method="OPTIONS")
    out += h2_own_answer(r, 200, "h2c OPTIONS *")
    if r["status"] is not None and "allow" not in r["headers"]:
        out.append("h2c OPTIONS *: no allow field (%s)" % r["headers"])
    return out + nothing_at(o, "OPTIONS *")


# --------------------------------------------------------------------------------------
def test(t):
    # Fixed ports (chosen free) so that connect_ports can name the proxy's own two; the
    # flags after the harness's own --listen/--admin-listen win.
    pp, ap = H.free_port(), H.free_port()
    while ap == pp:
        ap = H.free_port()
    cfg = H.base_config(rate=1000, burst=1000)
    cfg["security"]["connect_ports"] = [443, pp, ap]
    proxy = t.proxy(cfg, name="proxy", extra_args=["--listen", "127.0.0.1:%d" % pp,
                                                     "--admin-listen", "127.0.0.1:%d" % ap])
    H.check(proxy.port == pp and proxy.admin_port == ap, "the proxy listens on %d/%d, not %d/%d"
            % (proxy.port, proxy.admin_port, pp, ap))

    users_path = os.path.join(t.workdir, "users.htpasswd")
    with open(users_path, "w") as f:
        f.write("crawler:{SHA}%s\n" % base64.b64encode(hashlib.sha1(b"pw").digest()).decode())
    ucfg = H.base_config(rate=1000, burst=1000)
    ucfg["security"]["users_file"] = users_path
    users = t.proxy(ucfg, name="proxy-users")

    cases = [("A0 Content-Length 2^63-1 accepted", lambda: case_a0(t, proxy))]
    for i, v in enumerate((str(2 ** 63), str(10 ** 19), str(2 ** 64 - 1))):
        cases.append(("A%d Content-Length %s -> 400, close" % (i + 1, v),
                      lambda v=v, i=i: case_a(t, proxy, v, i + 1)))
    cases += [
        ("B one 70 KB header field -> 431", lambda: case_b(t, proxy)),
        ("C h2c 150 header fields -> 431", lambda: case_c(t, proxy)),
        ("D1 h2c OPTIONS Max-Forwards 0 answered by the proxy", lambda: case_d1(t, proxy)),
        ("D2 h2c OPTIONS Max-Forwards 3 -> 2 at the origin", lambda: case_d2(t, proxy)),
        ("E own listeners (admin, proxy port) -> 403", lambda: case_e(t, proxy)),
        ("F h2 connection error closes the connection", lambda: case_f(t, proxy)),
        ("G h2c TRACE / CONNECT judged before credentials", lambda: case_g(t, users, "g")),
        ("H1 a denied destination is 403 before credentials (HTTP/1.1, h2c)", lambda: case_h1(t, users)),
        ("H2 TRACE with 150 fields is 405 (HTTP/1.1, h2c)", lambda: case_h2(t, proxy)),
        ("H3 OPTIONS * answered by the proxy (HTTP/1.1, h2c)", lambda: case_h3(t, proxy)),
    ]
    failures = []
    for name, fn in cases:
        t0 = time.monotonic()
        try:
            problems = fn()
        except Exception:  # noqa: BLE001 - one case's crash is that case's failure
            problems = ["unexpected error:\n" + traceback.format_exc()]
        if not proxy.alive() or not users.alive():
            problems.append("a proxy died")
        H.log("%s %s (%.1fs)%s" % ("FAIL" if problems else "ok  ", name, time.monotonic() - t0,
                                   "".join("\n        - " + p for p in problems)))
        if problems:
            failures.append((name, problems))
    if failures:
        print("\nSUMMARY: %d of %d cases failed:" % (len(failures), len(cases)))
        for name, problems in failures:
            print("  %s" % name)
            for p in problems:
                print("      - %s" % p)
        sys.stdout.flush()
    H.check(not failures, "%d case(s) failed: %s" % (len(failures), ", ".join(n for n, _ in failures)))


if __name__ == "__main__":
    H.main(test, timeout=55)
