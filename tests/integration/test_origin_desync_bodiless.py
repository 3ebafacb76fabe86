#!/usr/bin/python3
"""A pooled origin connection never carries one request's bytes into another's response
(origin-side response desync): bytes after a bodiless response, against a raw-socket
origin (raw_origin.py).

The client and origin sides are in origin_desync_exchange.py: every real answer of the
origin is tagged with the request's id, each request goes on a new client connection to
the case's own origin host, one after the other, so the proxy (one worker: one origin
pool) reuses its pooled origin connection, and stray bytes the origin sends carry the
markers EVIL / STRAY, which no client may ever see.

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
Every case runs; the failures of all of them are reported together. Besides the checks
above, politeproxy's outcome (origin_desync_checks.py) must show no stray byte at any
client and every follow-up with its own answer, whatever the differential says.

HAProxy differential: every case also runs through HAProxy and both sides' outcomes are
compared by aspect (origin_desync_run.py says how, and what fails the test); the
expected differences are KNOWN_DIFFERENCES below.

After a 101 or a 1xx: test_origin_desync_1xx.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from origin_desync_exchange import (  # noqa: E402
    DOMAIN, EVIL, STRAY_BODY, STRAY_DELAY, Case)
from origin_desync_run import run_cases  # noqa: E402


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

CASES = [Case("1 " + label, "stray", label, label, label + "." + DOMAIN, method, status,
              first) for label, method, status, first in STRAY_CASES]

# (case name, aspect) -> (politeproxy's value, HAProxy 2.6's value, why they differ).
# A difference not listed here fails the test, and so does an entry that no longer
# differs exactly as recorded. Here both proxies agree on every case.
KNOWN_DIFFERENCES = {}


def test(t):
    run_cases(t, CASES, KNOWN_DIFFERENCES)


if __name__ == "__main__":
    H.main(test, timeout=55)
