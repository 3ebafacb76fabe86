"""Hostile request input, table-driven: the strict HTTP/1.1 edge of issue 8. The tests
test_hostile_input_framing.py, _heads.py, _hostkeys.py and _deny.py each run some of
its groups; tests/fuzz/seeds_from_table.py turns every row into fuzz seeds.

ROWS below is the whole contract as data. Each Row is
  name     unique; also the key of KNOWN_DIFFERENCES (hostile_input_differential.py)
  group    framing (Transfer-Encoding, Content-Length, chunked body), line (request
           line, target, Host), field (field names and values), limit, method (TRACE,
           OPTIONS), stall, connect (CONNECT authority), hostkey (numeric spellings of
           one address), deny (the default deny list)
  send     the raw bytes a fresh client connection sends; "{port}" becomes the raw
           origin's port and "h.test" a name of the row's own (rNNN.test, resolved to
           127.0.0.1), so a host paused by one row's outcome cannot hold up the next
  answer   FWD (the origin's 200 comes back), ANY (whatever, see the hostkey group), or
           the status the proxy answers itself
  origin   what may reach the origin:
             NOTHING    no byte
             HEAD_ONLY  the head may arrive (the proxy streams the body) but the
                        origin parses no complete request, and the proxy closes that
                        origin connection within a second
             Seen(...)  exactly one request; `lines` {lower-case field name: the exact
                        field lines} (an empty list = no such line), and `body`, when
                        given, the exact bytes that follow the head on that connection
             None       not checked (the hostkey rows check the group instead)
  close    True: the proxy closes the client connection after the answer, and no byte
           follows the answer (no second response to bytes smuggled behind it)
  within   the answer must be complete within this many seconds of the last byte sent
  headers  field names the answer must carry (Allow)
  status   text the Proxy-Status field must contain besides "politeproxy"
Every answer must carry Proxy-Status with "politeproxy" (an answer of 400 or more also
"error="). After each row a normal GET for the row's host gets the origin's 200 through
the proxy (the row did not break or pause that host) and the sum of
politeproxy_host_in_flight and politeproxy_host_waiting settles to 0 within 2 s. A
request smuggled in a body (target /smuggled) must never be parsed by the origin.
(hostile_input_checks.py checks all of this.)"""
import collections

FWD, ANY = "forwarded", "any"
NOTHING, HEAD_ONLY = "nothing", "head only"
Seen = collections.namedtuple("Seen", "lines body", defaults=({}, None))
Row = collections.namedtuple(
    "Row", "name group send answer origin close within headers status",
    defaults=(None, None, (), ""))

ORIGIN_BODY = b"origin-ok"
HELLO_CHUNKED = b"5\r\nhello\r\n0\r\n\r\n"
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: h.test\r\n\r\n"
AT_ONCE = 1.0
ANSWER_TIMEOUT = 1.5   # a row's answer (the proxy's own, or the origin's at once)
BUDGET = 55.0          # rows not started by then are reported as not run


def msg(*fields, line="POST http://h.test:{port}/ HTTP/1.1", host="h.test:{port}",
        body=b""):
    """A request: the line, Host (unless None), the field lines, an empty line, body."""
    lines = [line] + ([] if host is None else ["Host: " + host]) + list(fields)
    return b"".join((l if isinstance(l, bytes) else l.encode("latin-1")) + b"\r\n"
                    for l in lines) + b"\r\n" + body


URL = "http://h.test:{port}/"


def get(target=URL, *fields, version="HTTP/1.1", **kw):
    return msg(*fields, line="GET %s %s" % (target, version), **kw)


def te(*values, body=HELLO_CHUNKED, **kw):
    """A POST with one Transfer-Encoding field line per value."""
    return msg(*["Transfer-Encoding: " + v for v in values], body=body, **kw)


def cl(*values, body=b"hello"):
    """A POST with one Content-Length field line per value."""
    return msg(*["Content-Length: " + v for v in values], body=body)


def chunked(body):
    """A POST with Transfer-Encoding: chunked and these raw body bytes."""
    return te("chunked", body=body)


def connect(authority):
    return msg(line="CONNECT %s HTTP/1.1" % authority, host=authority)


def rechunked(data):
    """What the origin must see: the body re-chunked, then no trailer."""
    return Seen({"transfer-encoding": ["Transfer-Encoding: chunked"],
                 "content-length": []}, b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))


def length(data):
    return Seen({"content-length": ["Content-Length: %d" % len(data)],
                 "transfer-encoding": []}, data)


def bad(name, group, send, status=400):
    """Answered by the proxy itself, then the connection closes; nothing forwarded."""
    return Row(name, group, send, status, NOTHING, close=True)


def torn(name, send):
    """A broken chunked body: 400 at once, then close; the origin gets no request."""
    return Row(name, "framing", send, 400, HEAD_ONLY, close=True, within=AT_ONCE)


def fwd(name, group, send, origin=Seen()):
    return Row(name, group, send, FWD, origin)


SPELLINGS = ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001",
             "0177.0.0.1", "0x7f.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.0.0.1."]
V6_SPELLINGS = ["[::1]", "[0:0:0:0:0:0:0:1]"]
DENIED = ["[::127.0.0.1]", "224.0.0.1", "239.255.255.250", "[ff02::1]", "255.255.255.255",
          "0.0.0.0", "[::]", "192.0.2.1", "198.51.100.1", "203.0.113.1", "[2001:db8::1]",
          "[64:ff9b::a00:1]", "[2002:a00:1::1]", "[::ffff:10.0.0.1]", "100.64.0.1",
          "[fc00::1]", "[fe80::1]", "[100::1]", "240.0.0.1", "192.88.99.1", "10.0.0.1",
          "169.254.169.254", "[2001::1]"]
HOLD = 0.6
IDLE = 1.0

ROWS = [
    # -- Transfer-Encoding ------------------------------------------------------------
    fwd("te chunked", "framing", te("chunked"), rechunked(b"hello")),
    fwd("te Chunked", "framing", te("Chunked"), rechunked(b"hello")),
    fwd("te CHUNKED", "framing", te("CHUNKED"), rechunked(b"hello")),
    fwd("te ,chunked", "framing", te(",chunked"), rechunked(b"hello")),
    fwd("te chunked,", "framing", te("chunked,"), rechunked(b"hello")),
    fwd("te ' chunked '", "framing", te(" chunked "), rechunked(b"hello")),
    bad("te chunked, chunked", "framing", te("chunked, chunked")),
    bad("te fields chunked + chunked", "framing", te("chunked", "chunked")),
    bad("te xchunked", "framing", te("xchunked")),
    bad("te gzip", "framing", te("gzip")),
    bad("te identity", "framing", te("identity")),
    bad("te chunked, gzip", "framing", te("chunked, gzip")),
    bad("te empty", "framing", te("")),
    bad("te chunked;q=1", "framing", te("chunked;q=1")),
    bad("te gzip, chunked", "framing", te("gzip, chunked"), 501),
    bad("te fields gzip + chunked", "framing", te("gzip", "chunked"), 501),
    bad("te + cl (TE first)", "framing",
        msg("Transfer-Encoding: chunked", "Content-Length: 5",
            body=b"0\r\n\r\n" + SMUGGLED)),
    bad("te + cl (CL first)", "framing",
        msg("Content-Length: 5", "Transfer-Encoding: chunked",
            body=b"0\r\n\r\n" + SMUGGLED)),
    bad("te on HTTP/1.0", "framing",
        te("chunked", line="POST http://h.test:{port}/ HTTP/1.0")),
    # -- Content-Length ---------------------------------------------------------------
    fwd("cl 5", "framing", cl("5"), length(b"hello")),
    fwd("cl 005", "framing", cl("005"), length(b"hello")),
    fwd("cl 23 digits", "framing", cl("00000000000000000000005"), length(b"hello")),
    fwd("cl 5, 5", "framing", cl("5, 5"), length(b"hello")),
    fwd("cl fields 5 + 5", "framing", cl("5", "5"), length(b"hello")),
    bad("cl 5, 6", "framing", cl("5, 6")),
    bad("cl fields 5 + 6", "framing", cl("5", "6")),
    bad("cl +5", "framing", cl("+5")),
    bad("cl -1", "framing", cl("-1")),
    bad("cl 0x5", "framing", cl("0x5")),
    bad("cl 1e3", "framing", cl("1e3")),
    bad("cl empty", "framing", cl("")),
    bad("cl 5 5", "framing", cl("5 5")),
    bad("cl over 64 bits", "framing", cl("99999999999999999999999")),
    # -- chunked body -----------------------------------------------------------------
    fwd("chunk 05", "framing", chunked(b"05\r\nhello\r\n0\r\n\r\n"), rechunked(b"hello")),
    fwd("chunk 1A (upper-case hex)", "framing",
        chunked(b"1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n"),
        rechunked(b"abcdefghijklmnopqrstuvwxyz")),
    fwd("chunk ext", "framing", chunked(b"5;ext=1\r\nhello\r\n0\r\n\r\n"),
        rechunked(b"hello")),
    fwd("chunk quoted ext", "framing", chunked(b'5;a="q"\r\nhello\r\n0\r\n\r\n'),
        rechunked(b"hello")),
    fwd("chunk BWS before ;", "framing", chunked(b"5 ;a=b\r\nhello\r\n0\r\n\r\n"),
        rechunked(b"hello")),
    fwd("chunk trailers", "framing", chunked(b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
        rechunked(b"hello")),
    torn("chunk 0x5", chunked(b"0x5\r\nhello\r\n0\r\n\r\n")),
    torn("chunk +5", chunked(b"+5\r\nhello\r\n0\r\n\r\n")),
    torn("chunk -5", chunked(b"-5\r\nhello\r\n0\r\n\r\n")),
    torn("chunk leading space", chunked(b" 5\r\nhello\r\n0\r\n\r\n")),
    torn("chunk trailing space", chunked(b"5 \r\nhello\r\n0\r\n\r\n")),
    torn("chunk g", chunked(b"g\r\nhello\r\n0\r\n\r\n")),
    torn("chunk empty size line", chunked(b"\r\nhello\r\n0\r\n\r\n")),
    torn("chunk 17 hex digits", chunked(b"10000000000000000\r\nhello\r\n0\r\n\r\n")),
    torn("chunk bare LF", chunked(b"5\nhello\n0\n\n" + SMUGGLED)),
    torn("chunk bare CR", chunked(b"5\rhello\r\n0\r\n\r\n")),
    torn("chunk data too long", chunked(b"5\r\nhelloXX\r\n0\r\n\r\n")),
    torn("chunk data + request", chunked(b"5\r\nhello" + SMUGGLED + b"\r\n0\r\n\r\n")),
    Row("chunk upload stalls", "stall", chunked(b"5\r\nhel"), 408, HEAD_ONLY, close=True,
        within=IDLE + 1.5),
    # -- request line and Host --------------------------------------------------------
    bad("line two spaces", "line", msg(line="GET  http://h.test:{port}/ HTTP/1.1")),
    bad("line http/1.1 lower-case", "line", get(version="http/1.1")),
    bad("line no version", "line", msg(line="GET http://h.test:{port}/")),
    bad("line HTTP/2.0", "line", get(version="HTTP/2.0"), 505),
    bad("line HTTP/0.9", "line", get(version="HTTP/0.9"), 505),
    bad("line HTTP/3.0", "line", get(version="HTTP/3.0"), 505),
    bad("line origin-form", "line", get("/x")),
    Row("line asterisk-form", "line", msg(line="OPTIONS * HTTP/1.1"), 200, NOTHING,
        headers=("Allow",)),
    bad("line https target", "line", get("https://h.test:{port}/")),
    bad("line userinfo", "line", get("http://u:p@h.test:{port}/")),
    bad("line port 0", "line", get("http://h.test:0/", host="h.test:0")),
    bad("line port 99999", "line", get("http://h.test:99999/", host="h.test:99999")),
    bad("line port with letters", "line", get("http://h.test:80a/", host="h.test:80a")),
    bad("line two Host fields", "line", get(URL, "Host: h.test:{port}")),
    bad("line no Host", "line", get(host=None)),
    bad("line host 1.2.3.4.5", "line",
        get("http://1.2.3.4.5:{port}/", host="1.2.3.4.5:{port}")),
    bad("line host foo.123", "line", get("http://foo.123:{port}/", host="foo.123:{port}")),
    # -- field names and values -------------------------------------------------------
    bad("field NUL in value", "field", get(URL, b"X-A: a\x00b")),
    bad("field CR in value", "field", get(URL, b"X-A: a\rb")),
    bad("field bare LF in value", "field", get(URL, b"X-A: a\nX-B: b")),
    bad("field space before colon", "field", get(URL, b"X-A : b")),
    bad("field empty name", "field", get(URL, b": b")),
    fwd("field obs-fold", "field", get(URL, b"X-A: a", b" folded"),
        Seen({"x-a": ["X-A: a folded"]})),
    fwd("field obs-text", "field", get(URL, b"X-O: caf\xe9 \xff"),
        Seen({"x-o": ["X-O: caf\xe9 \xff"]})),
    # -- limits -----------------------------------------------------------------------
    bad("limit request line 17 KB", "limit", get(URL + "a" * 17000), 414),
    bad("limit 101 field lines", "limit",
        get(URL, *["X-F%03d: v" % i for i in range(100)]), 431),
    fwd("limit 100 field lines", "limit",
        get(URL, *["X-F%03d: v" % i for i in range(99)])),
    bad("limit 70 KB header section", "limit",
        get(URL, *["X-Big%02d: %s" % (i, "b" * 3500) for i in range(20)]),
        431),
    # -- methods ----------------------------------------------------------------------
    Row("TRACE", "method", msg(line="TRACE http://h.test:{port}/ HTTP/1.1"), 405, NOTHING,
        headers=("Allow",)),
    Row("OPTIONS Max-Forwards 0", "method",
        msg("Max-Forwards: 0", line="OPTIONS http://h.test:{port}/ HTTP/1.1"), 200, NOTHING,
        headers=("Allow",)),
    Row("OPTIONS Max-Forwards 0 with a body", "method",
        msg("Max-Forwards: 0", "Content-Length: 5", line="OPTIONS http://h.test:{port}/ HTTP/1.1",
            body=b"hello"), 200, NOTHING, close=True, headers=("Allow",)),
    fwd("OPTIONS Max-Forwards 5", "method",
        msg("Max-Forwards: 5", line="OPTIONS http://h.test:{port}/ HTTP/1.1"),
        Seen({"max-forwards": ["Max-Forwards: 4"]})),
    # -- CONNECT authority ------------------------------------------------------------
    Row("connect h.test:PORT (allowed)", "connect", connect("h.test:{port}"), 200, NOTHING),
] + [bad("connect " + a, "connect", connect(a)) for a in (
    "h.test:99999", "h.test:443x", "h.test:", "h.test", "h.test:0", ":443", "u@h.test:443",
    "h.test:+443", "h.test:443/x", "http://h.test:443")
] + [
    # -- numeric spellings of one address: one host key -------------------------------
    Row("hostkey " + s, "hostkey", get("http://%s:{port}/hold?k=%d" % (s, i),
                                       host=s + ":{port}"),
        FWD, Seen({"host": ["Host: 127.0.0.1:{port}"]}))
    for i, s in enumerate(SPELLINGS)
] + [
    Row("hostkey " + s, "hostkey", get("http://%s:{port}/v6" % s, host=s + ":{port}"), ANY,
        None) for s in V6_SPELLINGS
] + [
    # -- the default deny list (run in a private network namespace) -------------------
    Row("deny GET " + a, "deny", get("http://%s:{port}/" % a, host=a + ":{port}"), 403,
        NOTHING, status="destination_ip_prohibited") for a in DENIED
] + [
    Row("deny CONNECT " + a, "deny", connect(a + ":443"), 403, NOTHING,
        status="destination_ip_prohibited") for a in DENIED
]

DIFF_GROUPS = ("framing", "line", "field", "limit", "method")
