"""Request ids and matching answers to them. Every request of the desync, h2c, TLS and
fleet scenarios carries a unique id (X-Req-Id, and ?id= in its target); the origins tag
their answers with it: the desync origin with X-Answer-To and the body
"answer to <id>\\n", origin.py's JSON echo with the target and headers it received.
A client checks that each answer it gets is its own (judge_desync, judge_echo). The
kinds of the desync origin (KINDS) and what the proxy must make of each are here too."""

import itertools
import json
import re
from urllib.parse import parse_qs, urlsplit

from soak_config import MARKERS

_ids = itertools.count(1)


def new_id(prefix):
    """A request id unique in the run: prefix + 7 digits."""
    return "%s%07d" % (prefix, next(_ids))


# kind -> (method, weight on shared hosts (0: late kinds, private hosts only),
#          status the origin's answer must have, or None: only the proxy may answer)
KINDS = {
    "ok":         ("GET", 36, 200),   # a tagged 200
    "ok_head":    ("HEAD", 5, 200),   # a correct HEAD answer
    "interim":    ("GET", 5, 200),    # 100 or 103, then the tagged 200
    "head_body":  ("HEAD", 8, 200),   # HEAD answered with a body in the same write
    "204":        ("GET", 7, 204),    # 204, then a stray response in the same write
    "304":        ("GET", 7, 304),    # 304 (with or without Content-Length: 0), same
    "101":        ("GET", 6, None),   # unsolicited 101, HTTP-looking bytes now or later
    "1xx":        ("GET", 4, None),   # 150 with a complete response behind it
    "reset":      ("GET", 5, None),   # RST before any byte
    "reset_head": ("GET", 3, None),   # part of a status line, then RST
    "head_late":  ("HEAD", 0, 200),   # HEAD's body 0.05-0.2 s after the answer
    "204_late":   ("GET", 0, 204),    # 204, the stray response 0.05-0.2 s later
    "304_late":   ("GET", 0, 304),
}
SHARED_KINDS = [k for k, v in KINDS.items() if v[1]]
SHARED_WEIGHTS = [KINDS[k][1] for k in SHARED_KINDS]
LATE_KINDS = [k for k, v in KINDS.items() if not v[1]]


def pick_shared_kind(rng):
    return rng.choices(SHARED_KINDS, SHARED_WEIGHTS)[0]


def answer_body(rid):
    return ("answer to %s\n" % rid).encode()


def proxy_error_of(proxy_status):
    m = re.search(r"error=([A-Za-z0-9_]+)", proxy_status or "")
    return m.group(1) if m else None


def label_of(status, proxy_error):
    return "%d:%s" % (status, proxy_error) if proxy_error else str(status)


def markers_in(data):
    return [m.decode() for m in MARKERS if m in data]


def judge_desync(kind, rid, status, answer_to, body, proxy_error, interim=()):
    """An answer to a desync request. Returns (fail, warn, detail): fail for an answer
    that is not this request's (another id, a stray marker, the origin's 101/1xx or a
    body where none belongs), warn for a status the kind should not get."""
    method, _, want = KINDS[kind]
    bad_interim = [s for s in interim if s not in (100, 103)]
    if bad_interim or status == 101 or 100 <= status < 200:
        return ("an origin's %s reached the client" % (bad_interim or [status]), None,
                "%s id %s" % (kind, rid))
    if markers_in(body):
        return "stray origin bytes reached a client", None, "%s id %s body %r" % (
            kind, rid, body[:80])
    if proxy_error:
        if proxy_error == "connection_limit_reached" and status == 503:
            return None, None, ""      # the host was paused (its resets, 502s) too long
        if want is None and status == 502:
            return None, None, ""      # the proxy's answer to a 101, 1xx or reset
        return None, "unexpected proxy answer for desync:%s" % kind, "%s id %s" % (
            label_of(status, proxy_error), rid)
    if answer_to != rid:
        return ("response to another request (id mismatch)", None,
                "%s: sent id %s, got %s X-Answer-To %r body %r" % (
                    kind, rid, status, answer_to, body[:80]))
    if want is None:
        return ("the origin's answer to a %s request reached the client" % kind, None,
                "id %s status %d" % (rid, status))
    if status != want:
        return None, "unexpected status for desync:%s" % kind, "id %s status %d" % (rid, status)
    expect_body = answer_body(rid) if method == "GET" and status == 200 else b""
    if body != expect_body:
        return ("corrupt body" if expect_body else "a body where none belongs", None,
                "%s id %s: %r" % (kind, rid, body[:80]))
    return None, None, ""


def echo_matches(rid, body):
    """Does origin.py's JSON echo say it answered the request with id rid? (None when
    it does, else what it answered instead)."""
    try:
        j = json.loads(body.decode())
    except (ValueError, UnicodeDecodeError):
        return "not the origin's JSON echo: %r" % body[:80]
    got = parse_qs(urlsplit(j.get("target", "")).query).get("id")
    hdr = [v for k, v in j.get("headers", []) if k.lower() == "x-req-id"]
    if got != [rid] or hdr != [rid]:
        return "the echo of target %r, X-Req-Id %s" % (j.get("target"), hdr)
    return None


def judge_echo(rid, status, body, proxy_error):
    """An answer from origin.py to a tagged GET (h2c, TLS, fleet): (fail, detail) for a
    200 that is not this request's; other statuses are the caller's to judge."""
    if markers_in(body):
        return "stray origin bytes reached a client", "id %s body %r" % (rid, body[:80])
    if status != 200 or proxy_error:
        return None, ""
    other = echo_matches(rid, body)
    if other:
        return "response to another request (id mismatch)", "sent id %s, got %s" % (rid, other)
    return None, ""
