#!/usr/bin/python3
"""Every failure of the origin gives the host's slot back (no permit leak), as the world
sees it.

One host name (faults.test), concurrency 2, a high rate, short timeouts
(connect 2s, response_headers 1s, idle 2s), adaptive off, backoff 100ms without jitter.
A raw-socket origin (fault_origin.py) picks its behaviour from the request path. Each
fault runs three times: once, once more, then two at once; every client gets exactly one
response (or a closed connection where no response is possible):
  2. /midbody  200 with Content-Length 1000000, 20000 bytes, then RST: the client gets
               the truncated body and a closed connection, nothing else
  3. /hang     no answer: 504, Proxy-Status error=http_response_timeout, after ~1s
  4. /garbage  not HTTP: 502, error=http_protocol_error
  (probe: 2 slow requests are in flight together at the origin: nothing leaked so far)
  1. /close    the origin closes right after reading the request: 502,
               error=connection_terminated
  5. a port with nothing listening: 502, error=connection_refused
(1 and 5 are "refused" incidents: they collapse the limit to 1 and pause the host for
the backoff, so they run last.)  Then, once host_paused_seconds is 0: host_in_flight
and host_waiting are 0 (or absent), 4 slow requests (/slow: the 200 header at once, the
body ~1s later) all get 200 and the origin sees exactly 2 of them in flight at once (a
leaked slot would make it 1 or 0), and the proxy is alive and /healthz answers.
Faults 6 and 7 (the client gives up): test_fault_paths_client.py."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fault_origin import MIDBODY_BYTES, MIDBODY_CL, MIDBODY_SENT  # noqa: E402
from fault_paths_common import (  # noqa: E402
    RUNS, Client, case_runner, finish, get_bytes, probe, proxy_status, start)


def run_simple(t, proxy, port, path, status, error, what, min_s=0.0, max_s=8.0):
    """GET path; each client gets exactly one response, `status` with Proxy-Status
    error=`error`."""
    for run, n in RUNS:
        clients = []
        t0 = time.monotonic()
        for i in range(n):
            c = Client(proxy.port)
            clients.append((c, "%s%d" % (run, i)))
            c.send(get_bytes(port, path, "%s-%s%d" % (path.strip("/"), run, i)))
        for c, tag in clients:
            label = "%s (%s)" % (what, tag)
            try:
                responses, left = c.read_all_responses(first_timeout=max_s, settle=0.3)
                elapsed = time.monotonic() - t0
                H.check(len(responses) == 1 and not left,
                        "%s: expected exactly one response; got %d %r, leftover %r; raw %r;"
                        " %s" % (label, len(responses), responses, left[:200], c.raw[:600],
                                 t.o.summary(path if port == t.o.port else None)))
                r = responses[0]
                H.check(r.status == status,
                        "%s: status %d, expected %d; headers %s body %r; %s"
                        % (label, r.status, status, r.headers, r.body[:200],
                           t.o.summary(path if port == t.o.port else None)))
                ps = proxy_status(r)
                H.check(re.search(r"(^|;)\s*error=%s\s*(;|$)" % re.escape(error), ps),
                        "%s: Proxy-Status %r, expected error=%s" % (label, ps, error))
                H.check(min_s <= elapsed <= max_s,
                        "%s: answered after %.2fs, expected %.1f..%.1fs"
                        % (label, elapsed, min_s, max_s))
            finally:
                c.close()
        H.log("%s: %s x%d -> %d error=%s" % (what, run, n, status, error))


def fault_midbody(t, proxy):
    o = t.o
    what = "2 reset mid-body"
    for run, n in RUNS:
        clients = []
        for i in range(n):
            c = Client(proxy.port)
            tag = "midbody-%s%d" % (run, i)
            clients.append((c, tag))
            c.send(get_bytes(o.port, "/midbody", tag))
        for c, tag in clients:
            label = "%s (%s)" % (what, tag)
            try:
                eof = c.read_until_eof(8)
                raw = c.raw
                H.check(eof, "%s: the proxy kept the client connection open 8s after the"
                        " origin reset mid-body; received %d bytes, head %r; %s"
                        % (label, len(raw), raw[:300], o.summary("/midbody")))
                head, sep, body = raw.partition(b"\r\n\r\n")
                H.check(sep and head.startswith(b"HTTP/1.1 200"),
                        "%s: expected the origin's 200 header then a truncated body; got %r"
                        % (label, raw[:400]))
                hd = {}
                for l in head.decode("latin-1").split("\r\n")[1:]:
                    k, _, v = l.partition(":")
                    hd[k.strip().lower()] = v.strip()
                H.check(hd.get("content-length") == str(MIDBODY_CL)
                        and "transfer-encoding" not in hd,
                        "%s: the origin's Content-Length %d should pass through; header %r"
                        % (label, MIDBODY_CL, head))
                H.check(len(body) < MIDBODY_CL and body == MIDBODY_BYTES[:len(body)],
                        "%s: after the header the client got %d bytes, expected a prefix of"
                        " the %d the origin sent (nothing else, no second response);"
                        " tail %r" % (label, len(body), MIDBODY_SENT, body[-200:]))
                H.check(b"HTTP/1." not in body,
                        "%s: a second status line inside the truncated body" % label)
            finally:
                c.close()
        H.log("%s: %s x%d -> 200 header, truncated body, connection closed"
              % (what, run, n))


def test(t):
    proxy = start(t)
    o = t.o
    failures = []
    case = case_runner(proxy, failures)

    # faults that are not incidents: the limit stays at 2
    case("2 reset mid-body", lambda: fault_midbody(t, proxy))
    case("3 origin hangs", lambda: run_simple(
        t, proxy, o.port, "/hang", 504, "http_response_timeout", "3 origin hangs",
        min_s=0.9, max_s=8.0))
    case("4 garbage", lambda: run_simple(
        t, proxy, o.port, "/garbage", 502, "http_protocol_error", "4 garbage"))

    # probe: nothing leaked so far (the limit has not collapsed yet)
    case("probe", lambda: probe(t, proxy, "2, 3, 4"))

    # incidents: refused / closed without an answer collapse the limit and pause
    case("1 origin closes", lambda: run_simple(
        t, proxy, o.port, "/close", 502, "connection_terminated", "1 origin closes"))
    dead = H.free_port()
    case("5 connection refused", lambda: run_simple(
        t, proxy, dead, "/refused", 502, "connection_refused", "5 connection refused"))

    finish(t, proxy, failures)


if __name__ == "__main__":
    H.main(test, timeout=45)
