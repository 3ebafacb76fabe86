#!/usr/bin/python3
"""Hostile request input, table-driven: the strict HTTP/1.1 edge of issue 8.

ROWS below is the whole contract as data. Each Row is
  name     unique; also the key of KNOWN_DIFFERENCES
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

How they run:
- main proxy: every row of the groups framing, line, field, limit, method, connect,
  one after the other; the stall row on a second proxy with timeouts.idle 1s.
- hostkey: the ten spellings of 127.0.0.1 at once, the origin holding each request
  0.6 s, 127.0.0.1 configured with concurrency 1: the origin's peak in flight must be
  1, each request reaches it with "Host: 127.0.0.1:PORT", and /hosts and the `host`
  label of politeproxy_requests_total show the one key "127.0.0.1"; [::1] and
  [0:0:0:0:0:0:0:1] must both show as key "::1" (the origin listens on IPv4 only, so
  their answer is not checked).
- deny: inside a private network namespace (the file re-runs itself under
  `unshare -n` with its own proxy, origin and client), so a wrong proxy cannot send a
  packet off the machine; skipped, with the reason, where that is impossible.
  politeproxy_requests_total must not move (denied before a slot is taken).
- differential: the rows of the groups framing, line, field, limit, method are also
  sent through HAProxy (`haproxy -db`) to the same kind of raw origin; each side's
  outcome is "refused" (an answer >= 400, no complete request at the origin) or
  "forwarded" with the framing the origin saw. Every difference is printed; one not in
  KNOWN_DIFFERENCES, or an entry there that no longer differs, fails the test. Skipped
  when haproxy is not installed.
Every failing row is collected; the summary lists them all, then the test fails. A
correct proxy passes in about 15 s; a wrong one costs up to ~4 s per failing row (the
1.5 s answer wait, the after-check), hence the 90 s ctest TIMEOUT of this test."""
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from raw_origin import RawOrigin, ok  # noqa: E402

# --------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------
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

# Row name -> why politeproxy (per the contract) and HAProxy 2.6 (defaults, HTTP mode, a
# gateway) differ, citing RFC 9110 / 9112, and which side is right.
ROLE = ("Role: HAProxy is a gateway that routes by its configuration and never uses the"
        " target's authority, so it forwards; politeproxy is a forward proxy that must"
        " connect to that authority. ")
KNOWN_DIFFERENCES = {
    "te ,chunked": "HAProxy answers 422 to an empty first list element. RFC 9110 5.6.1: a"
    " recipient MUST accept and ignore a reasonable number of empty list elements, so the"
    " coding list is just `chunked`. politeproxy (forwards, chunked) is right; HAProxy is"
    " wrong (and inconsistent: it accepts `chunked,`).",
    "te + cl (TE first)": "RFC 9112 6.3 (3): with both Transfer-Encoding and Content-Length"
    " a server MAY reject the message or process it by Transfer-Encoding alone; an"
    " intermediary that forwards MUST remove Content-Length first, and either side MUST"
    " close the connection afterwards (6.1). HAProxy forwards as chunked, politeproxy"
    " rejects (400, close). Both right; politeproxy's is the smuggling-safe choice.",
    "te + cl (CL first)": "Same as 'te + cl (TE first)' (RFC 9112 6.1, 6.3): HAProxy"
    " forwards by Transfer-Encoding, politeproxy rejects. Both right.",
    "te on HTTP/1.0": "RFC 9112 6.1: a recipient of an HTTP/1.0 message with"
    " Transfer-Encoding MUST treat its framing as faulty and close the connection. HAProxy"
    " forwards it as a chunked HTTP/1.0 request; politeproxy answers 400 and closes."
    " politeproxy is right, HAProxy lax.",
    "chunk trailers": "RFC 9112 7.1.2: a recipient that removes the chunked coding MAY"
    " retain or discard the trailer fields. HAProxy forwards `X-T: 1`, politeproxy drops"
    " trailers (last chunk `0\\r\\n\\r\\n`). Both right.",
    "chunk trailing space": "RFC 9112 7.1.1: chunk = chunk-size [ chunk-ext ] CRLF and"
    " chunk-ext = *( BWS \";\" ... ): whitespace after the size is allowed only before a"
    " `;`, so `5 ` CRLF is invalid. HAProxy tolerates it (and re-chunks), politeproxy"
    " answers 400. politeproxy follows the grammar; HAProxy's leniency is harmless for its"
    " own output but is what parser-differential attacks feed on.",
    "chunk bare LF": "RFC 9112 7.1: chunk lines end in CRLF; the bare-LF tolerance of RFC"
    " 9112 2.2 covers the start-line and field lines only. HAProxy accepts LF-only chunk"
    " lines (and forwards the bytes after `0\\n\\n` as a second request); politeproxy"
    " answers 400 and closes. politeproxy is right: a CRLF-only back end reads those bytes"
    " as body, the classic smuggling split.",
    "line two spaces": "RFC 9112 3: the request-line uses single SPs, but a recipient MAY"
    " parse on whitespace boundaries (HAProxy does, and forwards) or answer 400 to an"
    " invalid request-line (politeproxy). Both right.",
    "line HTTP/2.0": "An HTTP/1-syntax request line claiming major version 2. HAProxy"
    " rewrites it to HTTP/1.1 and forwards; politeproxy answers 505 (RFC 9110 15.6.6: the"
    " major version is not supported; 2.5: minor-version leniency applies only within a"
    " major version). politeproxy is right, HAProxy lax.",
    "line HTTP/3.0": "As 'line HTTP/2.0': HAProxy downgrades to HTTP/1.1 and forwards,"
    " politeproxy answers 505 (RFC 9110 15.6.6, 2.5). politeproxy is right.",
    "line HTTP/0.9": "HAProxy forwards `GET ... HTTP/0.9` with a header section and"
    " `connection: keep-alive`, which HTTP/0.9 has neither of; politeproxy answers 505"
    " (RFC 9110 15.6.6). politeproxy is right.",
    "line origin-form": ROLE + "RFC 9112 3.2.2: a client MUST send absolute-form to a"
    " proxy, so politeproxy answers 400; for a gateway origin-form is the normal form"
    " (3.2.1). Both right for their role.",
    "line asterisk-form": ROLE + "RFC 9112 3.2.4: asterisk-form is only for a server-wide"
    " OPTIONS; sent to a forward proxy it addresses the proxy, which answers it itself"
    " (200 + Allow); HAProxy passes it to its server. Both right for their role.",
    "line https target": ROLE + "politeproxy does not originate TLS (clients use CONNECT)"
    " and answers 400; HAProxy forwards the https URI over its configured plain connection."
    " Both right.",
    "line userinfo": "RFC 9110 4.2.4: a recipient SHOULD treat userinfo in an http(s) URI"
    " from an untrusted source as an error. politeproxy does (400); HAProxy forwards it."
    " politeproxy is right.",
    "line port 0": ROLE + "Port 0 is valid syntax (RFC 3986 3.2.3 port = *DIGIT) but no"
    " destination; politeproxy answers 400. Both right for their role.",
    "line port 99999": ROLE + "99999 is valid URI syntax but not a TCP port; politeproxy"
    " answers 400 (the old binary connected to 99999 mod 65536). Both right for their"
    " role.",
    "line port with letters": "`h:80a` is not a valid authority (RFC 3986 3.2.3), so the"
    " Host value is invalid and RFC 9112 3.2 says a server MUST answer 400. politeproxy is"
    " right, HAProxy (forwards) is wrong.",
    "line two Host fields": "RFC 9112 3.2: a server MUST answer 400 to a request with more"
    " than one Host field line. HAProxy forwards one Host built from the absolute-form"
    " target; politeproxy answers 400. politeproxy is right.",
    "line no Host": "RFC 9112 3.2: an HTTP/1.1 request without Host MUST get 400. HAProxy"
    " forwards it without a Host; politeproxy answers 400. politeproxy is right.",
    "line host 1.2.3.4.5": ROLE + "A host whose last label is numeric but is no IPv4"
    " address is a reg-name to RFC 3986 3.2.2; politeproxy refuses it (400, the WHATWG"
    " 'ends in a number' rule) so no resolver reads it as a number. Stricter policy, not an"
    " RFC requirement; both conform.",
    "line host foo.123": "As 'line host 1.2.3.4.5': politeproxy's numeric-last-label policy"
    " (400) against HAProxy, which does not use the authority. Both conform.",
    "field NUL in value": "RFC 9110 5.5: CR, LF and NUL in a field value are invalid and"
    " dangerous; a recipient MUST reject the message or replace each with SP before"
    " forwarding. HAProxy 2.6 forwards the NUL byte as is: wrong. politeproxy (400) right.",
    "field bare LF in value": "RFC 9112 2.2: a recipient MAY recognise a bare LF as a line"
    " terminator; HAProxy does (forwards two fields), politeproxy answers 400, which 2.2"
    " also allows. Both right; politeproxy avoids a differential with CRLF-only parsers.",
    "TRACE": "RFC 9110 9.3.8: TRACE is optional. politeproxy refuses it (405 with Allow,"
    " RFC 9110 15.5.6), HAProxy forwards it. Both right; refusing avoids reflecting"
    " credentials back (cross-site tracing).",
    "OPTIONS Max-Forwards 0": "RFC 9110 7.6.2: an intermediary that receives OPTIONS with"
    " Max-Forwards 0 MUST NOT forward it and MUST answer as the final recipient. HAProxy"
    " forwards it: wrong. politeproxy (answers 200 + Allow itself) is right.",
    "OPTIONS Max-Forwards 0 with a body": "As 'OPTIONS Max-Forwards 0' (RFC 9110 7.6.2):"
    " HAProxy forwards it, politeproxy answers it itself and, as the body is left unread,"
    " closes the connection (RFC 9112 9.6). politeproxy is right.",
    "OPTIONS Max-Forwards 5": "RFC 9110 7.6.2: an intermediary MUST decrement Max-Forwards"
    " of an OPTIONS/TRACE it forwards. HAProxy forwards 5, politeproxy 4. politeproxy is"
    " right, HAProxy wrong.",
}

# --------------------------------------------------------------------------------------
# sending a row and observing both ends
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# the checks: each returns a list of problems
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# the host-key group: all spellings at once
# --------------------------------------------------------------------------------------
def send_all(port, datas, timeout):
    """send() each of datas on its own connection, all at once; results in order."""
    results = [None] * len(datas)

    def one(i):
        results[i] = send(port, datas[i], timeout)
    threads = [threading.Thread(target=one, args=(i,), daemon=True)
               for i in range(len(datas))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout + 10)
    return [r or (None, "client thread hung", None, False, b"") for r in results]


def run_hostkeys(proxy, origin, failures):
    """The spellings of 127.0.0.1 at once (one key: the origin sees them one at a time),
    then [::1] and its long form (one key ::1, whatever they are answered)."""
    rows = [r for r in ROWS if r.group == "hostkey" and r.answer == FWD]
    mark = origin.mark()
    results = send_all(proxy.port, [request_bytes(r, origin.port) for r in rows],
                       timeout=HOLD * len(rows) + 5)
    got, reqs = origin.since(mark)
    for i, row in enumerate(rows):
        mine = [r for r in reqs if r["target"] == "/hold?k=%d" % i]
        obs = Obs(*results[i], got, mine, set())
        record(failures, row, check_answer(row, obs) + check_origin(row, obs, origin.port))
    peak = H.overlap_peak([{"start": r["t0"], "end": r["t1"]} for r in reqs])
    group = []
    if peak != 1:
        group.append("the origin's peak in flight over the %d spellings was %d, expected 1"
                     " (one host key, concurrency 1)" % (len(rows), peak))
    group += check_keys(proxy, SPELLINGS, "127.0.0.1")

    # the origin listens on IPv4 only: [::1] is refused (and may pause its host), so
    # send both at once and take whatever answer they get
    v6 = [r for r in ROWS if r.group == "hostkey" and r.answer == ANY]
    results = send_all(proxy.port, [request_bytes(r, origin.port) for r in v6], timeout=2)
    answers = []
    for row, res in zip(v6, results):
        obs = Obs(*res, {}, [], set())
        answers.append("%s -> %s (Proxy-Status %r)" % (
            row.name, describe(obs), obs.resp and obs.resp.header("Proxy-Status")))
        H.log(answers[-1])
        record(failures, row, check_answer(row, obs) if obs.resp is not None else [])
    group += ["%s; answers: %s (allow_destinations has ::1/128)" % (p, "; ".join(answers))
              for p in check_keys(proxy, V6_SPELLINGS, "::1")]
    group += check_after(proxy, origin, "hostkeys.test")
    record(failures, Row("hostkey group", "hostkey", b"", ANY, None), group)


def key_forms(spelling):
    s = spelling.lower()
    return {s, s.strip("[]"), s.rstrip("."), s.strip("[]").rstrip(".")}


def check_keys(proxy, spellings, key):
    """/hosts and the requests_total host label show `key` and no other spelling."""
    out = []
    others = set().union(*map(key_forms, spellings)) - {key}
    status, _, body = proxy.admin_get("/hosts")
    keys = [h.get("key") for h in json.loads(body.decode())] if status == 200 else []
    if status != 200:
        out.append("GET /hosts answered %d" % status)
    labels = {dict(ls).get("host") for ls in
              H.mseries(proxy.metrics(), "politeproxy_requests_total")}
    if keys.count(key) != 1 and key not in labels:
        def shown(ks):  # the address-like keys, not the rows' *.test names
            return sorted(str(k) for k in ks if not str(k).endswith(".test"))
        out.append("key %r is neither once in /hosts (address keys: %s) nor a"
                   " requests_total host label (%s)" % (key, shown(keys), shown(labels)))
    if key in keys and keys.count(key) != 1:
        out.append("/hosts lists key %r %d times" % (key, keys.count(key)))
    wrong = sorted((set(keys) | labels) & others)
    if wrong:
        out.append("other spellings of %s became their own host keys: %s" % (key, wrong))
    return out


# --------------------------------------------------------------------------------------
# the deny rows, in a private network namespace
# --------------------------------------------------------------------------------------
NETNS_ENV = "POLITEPROXY_HOSTILE_NETNS_OUT"


def start_netns_child(t):
    """Start this file under `unshare -n` for the deny rows. (Popen, out path) or
    (None, reason to skip)."""
    if os.geteuid() != 0:
        return None, "not root"
    if not (shutil.which("unshare") and shutil.which("ip")):
        return None, "unshare or ip not installed"
    probe = subprocess.run(["unshare", "-n", "true"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=10)
    if probe.returncode != 0:
        return None, "unshare -n failed: %s" % probe.stderr.decode().strip()
    out = os.path.join(t.workdir, "netns.json")
    cmd = ["unshare", "-n", "/bin/sh", "-c", 'ip link set lo up && exec "$@"', "sh",
           "/usr/bin/python3", os.path.abspath(__file__), "--proxy", t.binary]
    env = dict(os.environ, **{NETNS_ENV: out})
    with open(out + ".log", "wb") as log:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT, preexec_fn=H._pdeathsig)
    return p, out


def test_in_netns(t):
    """The child: the deny rows, results to the JSON file named by NETNS_ENV."""
    origin = raw_origin("deny")
    t.origins.append(origin)
    proxy = t.proxy(H.base_config(rate=1000, burst=1000), "deny-proxy")
    results = {}
    for row in ROWS:
        if row.group == "deny":
            problems, obs = run_checked(row, proxy, origin)
            results[row.name] = problems
            H.log("%s %s -> %s" % ("FAIL" if problems else "ok", row.name, describe(obs)))
    with open(os.environ[NETNS_ENV], "w") as f:
        json.dump(results, f)


def collect_netns(child, out, failures):
    rows = [r for r in ROWS if r.group == "deny"]
    if child is None:
        print("SKIP %d deny rows: %s" % (len(rows), out), flush=True)
        return
    try:
        child.wait(40)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(5)
    with open(out + ".log", "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            print("    netns| " + line)
    try:
        with open(out) as f:
            results = json.load(f)
    except (OSError, ValueError) as e:
        results = {}
        H.log("the network-namespace child wrote no results (%s), exit %s"
              % (e, child.returncode))
    for row in rows:
        record(failures, row, results.get(row.name, ["did not run in the namespace child"
                                                     " (exit %s)" % child.returncode]))


# --------------------------------------------------------------------------------------
# the HAProxy differential
# --------------------------------------------------------------------------------------
def outcome(obs):
    """What a proxy did with a row, to compare two proxies: ("refused",) (an answer of
    400 or more, no complete request at the origin), ("forwarded", the framing of each
    request the origin parsed), ("answered 200",) or ("no answer",)."""
    if obs.origin_reqs:
        return ("forwarded",) + tuple(framing(r) for r in obs.origin_reqs)
    if obs.resp is None:
        return ("no answer",)
    return ("refused",) if obs.resp.status >= 400 else ("answered %d" % obs.resp.status,)


def framing(req):
    """A request's framing, by meaning: the transfer codings (empty list elements and
    case ignored), the Content-Length values (as numbers), Max-Forwards, the decoded
    body and the trailer fields."""
    def values(name):
        return [v.strip().lower() for k, line in req["headers"] if k.lower() == name
                for v in line.split(",") if v.strip()]
    lengths = sorted({int(v) if v.isdigit() else v for v in values("content-length")},
                     key=str)
    return "%s te=%s cl=%s mf=%s body=%r trailers=%r" % (
        req["method"], ",".join(values("transfer-encoding")) or "-",
        ",".join(map(str, lengths)) or "-", ",".join(values("max-forwards")) or "-",
        req["body"][:40], [t.decode("latin-1").lower() for t in req["trailers"]])


HAPROXY_CFG = """global
  maxconn 100
defaults
  mode http
  timeout connect 2s
  timeout client 3s
  timeout server 3s
  timeout http-request 2s
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  server origin 127.0.0.1:%d
"""



def start_haproxy(t):
    """(process, port, origin) or (None, reason, None)."""
    exe = shutil.which("haproxy")
    if not exe:
        return None, "haproxy is not installed (Debian package haproxy)", None
    origin = raw_origin("haproxy")
    t.origins.append(origin)
    port = H.free_port()
    cfg = os.path.join(t.workdir, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(HAPROXY_CFG % (port, origin.port))
    log = os.path.join(t.workdir, "haproxy.log")
    with open(log, "wb") as f:
        p = subprocess.Popen([exe, "-db", "-f", cfg], stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT, preexec_fn=H._pdeathsig)
    t.haproxy_proc = p

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return p.poll() is not None
    H.wait_until(up, 5)
    if p.poll() is not None:
        with open(log, "rb") as f:
            return None, "haproxy exited %s: %s" % (p.returncode, f.read()[-500:]), None
    H.log("haproxy %d on 127.0.0.1:%d -> raw origin %d" % (p.pid, port, origin.port))
    return p, port, origin


class Differential(threading.Thread):
    """The DIFF_GROUPS rows through HAProxy, in the background."""

    def __init__(self, port, origin):
        threading.Thread.__init__(self, daemon=True, name="haproxy-rows")
        self.port, self.origin, self.observed = port, origin, {}

    def run(self):
        for row in ROWS:
            if row.group in DIFF_GROUPS:
                self.observed[row.name] = run_row(row, self.port, self.origin,
                                                  wait_close=False)


def compare(pp_observed, ha_observed, failures):
    """Print every difference; fail on unknown ones and on stale KNOWN_DIFFERENCES."""
    problems = []
    for name in (r.name for r in ROWS if r.group in DIFF_GROUPS):
        if name not in pp_observed or name not in ha_observed:
            continue
        pp, ha = outcome(pp_observed[name]), outcome(ha_observed[name])
        known = KNOWN_DIFFERENCES.get(name)
        if pp != ha:
            print("DIFF %s\n  politeproxy: %s\n  haproxy:     %s\n  %s" % (
                name, short(pp, pp_observed[name]), short(ha, ha_observed[name]),
                "known: " + known if known else "NOT in KNOWN_DIFFERENCES"), flush=True)
            if not known:
                problems.append("%s: politeproxy %s, haproxy %s" % (name, pp[0], ha[0]))
        elif known:
            problems.append("%s: in KNOWN_DIFFERENCES but both now %s" % (name, pp[0]))
    if problems:
        failures["haproxy differential"] = problems


def short(o, obs):
    """An outcome with the answer and the bytes the origin got, for the DIFF lines."""
    got = b" | ".join(obs.origin_got.values())
    return "%s; answer %s; origin got %r" % (
        " / ".join(o), describe(obs), got[:240] + (b"..." if len(got) > 240 else b""))


# --------------------------------------------------------------------------------------
# the test
# --------------------------------------------------------------------------------------
def record(failures, row, problems):
    if problems:
        failures[row.name] = problems
        H.log("FAIL %s: %s" % (row.name, "; ".join(problems)))


def test(t):
    t.haproxy_proc = None
    failures = {}
    child, netns_out = start_netns_child(t)
    ha, ha_port, ha_origin = start_haproxy(t)
    diff = None
    if ha is not None:
        diff = Differential(ha_port, ha_origin)
        diff.start()
    else:
        print("SKIP haproxy differential: %s" % ha_port, flush=True)
    try:
        origin = raw_origin("hostile")
        t.origins.append(origin)
        cfg = H.base_config(hosts={"127.0.0.1": {"concurrency": 1}}, tls_port=origin.port,
                            concurrency=8, rate=1000, burst=1000)
        cfg["security"]["allow_destinations"].append("::1/128")
        proxy = t.proxy(cfg, "proxy")
        idle_proxy = t.proxy(H.base_config(timeouts={"idle": "%gs" % IDLE}), "idle-proxy")
        pp_observed = {}
        t0 = time.monotonic()
        for row in ROWS:
            if row.group in ("hostkey", "deny"):
                continue
            if time.monotonic() - t0 > BUDGET:
                record(failures, row, ["not run: the rows before took over %ds" % BUDGET])
                continue
            p = idle_proxy if row.group == "stall" else proxy
            problems, obs = run_checked(row, p, origin)
            pp_observed[row.name] = obs
            H.log("%s %s -> %s" % ("FAIL" if problems else "ok", row.name, describe(obs)))
            record(failures, row, problems)
        run_hostkeys(proxy, origin, failures)
        if diff is not None:
            diff.join(40)
            compare(pp_observed, diff.observed, failures)
        collect_netns(child, netns_out, failures)
    finally:
        for p in (t.haproxy_proc, child):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(5)
    print("\n==== %d failure(s): rows (of %d, and the hostkey group) and the differential"
          " ====" % (len(failures), len(ROWS)))
    for name, problems in failures.items():
        print("  %s:\n      %s" % (name, "\n      ".join(problems)))
    sys.stdout.flush()
    H.check(not failures, "%d row(s) failed: %s" % (len(failures), ", ".join(failures)))


if __name__ == "__main__":
    if os.environ.get(NETNS_ENV):
        H.main(test_in_netns, timeout=35)
    H.main(test, timeout=85)
