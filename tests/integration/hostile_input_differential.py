"""The rows of some groups of the hostile-input table (hostile_input_table.py) through
politeproxy, and those of DIFF_GROUPS among them also through HAProxy
(test_hostile_input_framing.py, test_hostile_input_heads.py): run_groups().

The differential: the rows are sent through HAProxy (`haproxy -db`) to the same kind of
raw origin; each side's outcome is "refused" (an answer >= 400, no complete request at
the origin) or "forwarded" with the framing the origin saw. Every difference is
printed; one not in KNOWN_DIFFERENCES, or an entry there that no longer differs, fails
the test. Skipped when haproxy is not installed."""
import os
import shutil
import socket
import subprocess
import threading
import time

import harness as H
from hostile_input_checks import (
    describe, raw_origin, record, report, run_checked, run_row, start_proxy)
from hostile_input_table import BUDGET, DIFF_GROUPS, IDLE, ROWS

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
    """The rows of `groups` (of DIFF_GROUPS) through HAProxy, in the background."""

    def __init__(self, port, origin, groups):
        threading.Thread.__init__(self, daemon=True, name="haproxy-rows")
        self.port, self.origin, self.observed = port, origin, {}
        self.groups = groups

    def run(self):
        for row in ROWS:
            if row.group in self.groups:
                self.observed[row.name] = run_row(row, self.port, self.origin,
                                                  wait_close=False)


def compare(pp_observed, ha_observed, groups, failures):
    """Print every difference among the rows of `groups`; fail on unknown ones and on
    stale KNOWN_DIFFERENCES."""
    problems = []
    for name in (r.name for r in ROWS if r.group in groups):
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


def run_groups(t, groups):
    """The rows of `groups` through politeproxy (the stall row through a proxy with
    timeouts.idle 1s, the others through start_proxy's), the DIFF_GROUPS rows among
    them through HAProxy at the same time, compared; the summary lists every failing
    row, then the test fails if any."""
    t.haproxy_proc = None
    failures = {}
    diff_groups = tuple(g for g in DIFF_GROUPS if g in groups)
    ha, ha_port, ha_origin = start_haproxy(t)
    diff = None
    if ha is not None:
        diff = Differential(ha_port, ha_origin, diff_groups)
        diff.start()
    else:
        print("SKIP haproxy differential: %s" % ha_port, flush=True)
    try:
        origin = raw_origin("hostile")
        t.origins.append(origin)
        proxy = start_proxy(t, origin)
        if "stall" in groups:
            idle_proxy = t.proxy(H.base_config(timeouts={"idle": "%gs" % IDLE}), "idle-proxy")
        pp_observed = {}
        t0 = time.monotonic()
        for row in ROWS:
            if row.group not in groups:
                continue
            if time.monotonic() - t0 > BUDGET:
                record(failures, row, ["not run: the rows before took over %ds" % BUDGET])
                continue
            p = idle_proxy if row.group == "stall" else proxy
            problems, obs = run_checked(row, p, origin)
            pp_observed[row.name] = obs
            H.log("%s %s -> %s" % ("FAIL" if problems else "ok", row.name, describe(obs)))
            record(failures, row, problems)
        if diff is not None:
            diff.join(40)
            compare(pp_observed, diff.observed, diff_groups, failures)
    finally:
        p = t.haproxy_proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(5)
    report(failures, "%d failure(s): rows (of %d, groups %s) and the differential"
           % (len(failures), len([r for r in ROWS if r.group in groups]), ", ".join(groups)))
