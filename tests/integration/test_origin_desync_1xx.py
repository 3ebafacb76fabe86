#!/usr/bin/python3
"""A pooled origin connection never carries one request's bytes into another's response
(origin-side response desync): an origin connection after a 101 or a 1xx, against a
raw-socket origin (raw_origin.py).

The client and origin sides are in origin_desync_exchange.py: every real answer of the
origin is tagged with the request's id, each request goes on a new client connection to
the case's own origin host, one after the other, so the proxy (one worker: one origin
pool) reuses its pooled origin connection, and stray bytes the origin sends carry the
markers EVIL / STRAY, which no client may ever see.

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
above, politeproxy's outcome (origin_desync_checks.py) must show no stray byte at any
client and every follow-up with its own answer, whatever the differential says.

HAProxy differential: every case also runs through HAProxy and both sides' outcomes are
compared by aspect (origin_desync_run.py says how, and what fails the test); the
expected differences are KNOWN_DIFFERENCES below.

Bytes after a bodiless response: test_origin_desync_bodiless.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from origin_desync_exchange import (  # noqa: E402
    DOMAIN, EVIL, STRAY_DELAY, Case, tagged_ok)
from origin_desync_run import run_cases  # noqa: E402


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

CASES = ([Case("2 " + label, "refused", label, "status-" + label,
               "status-" + label + "." + DOMAIN, "GET", None, first)
          for label, first in REFUSED_CASES]
         + [Case("2 interim " + label, "interim", "i" + label, "interim-" + label,
                 "interim-" + label.replace("+", "-") + "." + DOMAIN, "GET", 200, first)
            for label, first in INTERIM_CASES])

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


def test(t):
    run_cases(t, CASES, KNOWN_DIFFERENCES)


if __name__ == "__main__":
    H.main(test, timeout=55)
