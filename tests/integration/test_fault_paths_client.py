#!/usr/bin/python3
"""A client that gives up half-way gives the host's slot back (no permit leak), and the
proxy lets go of the origin connection, as the world sees it.

One host name (faults.test), concurrency 2, a high rate, short timeouts
(connect 2s, response_headers 1s, idle 2s), adaptive off, backoff 100ms without jitter.
A raw-socket origin (fault_origin.py) picks its behaviour from the request path. Each
fault runs three times: once, once more, then two at once:
  6. POST /upload, Content-Length 1 MB: the client sends 10 KB and disconnects while the
               proxy relays the body; the proxy closes the origin connection
  7. /big      5 MB sent slowly: the client disconnects after ~256 KB; the proxy closes
               the origin connection before the 5 MB are through
  (probe: 2 slow requests are in flight together at the origin: nothing leaked so far)
Then, once host_paused_seconds is 0: host_in_flight and host_waiting are 0 (or absent),
4 slow requests (/slow: the 200 header at once, the body ~1s later) all get 200 and the
origin sees exactly 2 of them in flight at once (a leaked slot would make it 1 or 0),
and the proxy is alive and /healthz answers.
Faults 1-5 (the origin fails): test_fault_paths_origin.py."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from fault_origin import UPLOAD_CL, UPLOAD_SENT, pattern  # noqa: E402
from fault_paths_common import (  # noqa: E402
    HOST, RUNS, Client, case_runner, finish, get_bytes, probe, start)


def fault_upload(t, proxy):
    o = t.o
    what = "6 client drops its POST body"
    for run, n in RUNS:
        clients = []
        for i in range(n):
            tag = "upload-%s%d" % (run, i)
            c = Client(proxy.port)
            c.send(("POST http://%s:%d/upload?tag=%s HTTP/1.1\r\nHost: %s:%d\r\n"
                    "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
                    % (HOST, o.port, tag, HOST, o.port, UPLOAD_CL)).encode()
                   + pattern(UPLOAD_SENT))
            clients.append((c, tag))
        for c, tag in clients:
            # the proxy is relaying: the origin has the request (and the bytes so far)
            got = H.wait_until(lambda: o.recs("/upload", tag), 5.0)
            H.check(got, "%s (%s): the request never reached the origin; %s"
                    % (what, tag, o.summary("/upload")))
            # give the proxy a moment to pass on the 10 KB it has (it may hold a partial
            # relay chunk back: that is not what this test is about)
            rec = H.wait_until(lambda: [r for r in o.recs("/upload", tag)
                                        if r["body"] >= UPLOAD_SENT], 0.5)
            if not rec:
                H.log("%s (%s): note: the origin had %d of the %d body bytes sent when the"
                      " client closed" % (what, tag, o.recs("/upload", tag)[0]["body"],
                                          UPLOAD_SENT))
        t_closed = time.monotonic()
        for c, tag in clients:
            c._fill(time.monotonic() + 0.05)
            H.check(not c.raw, "%s (%s): the proxy answered before the body was complete:"
                    " %r" % (what, tag, c.raw[:300]))
            c.close()
        for c, tag in clients:
            done = H.wait_until(lambda: all(r["end"] is not None
                                            for r in o.recs("/upload", tag)), 5.0)
            H.check(done, "%s (%s): the proxy still held the origin connection 5s after"
                    " the client disconnected; %s" % (what, tag, o.summary("/upload")))
            recs = o.recs("/upload", tag)
            H.check(len(recs) == 1 and recs[0]["outcome"].startswith("EOF after"),
                    "%s (%s): origin records %s" % (what, tag, o.summary("/upload")))
        H.log("%s: %s x%d -> origin saw %s within %.2fs of the client closing"
              % (what, run, n, [r["outcome"] for c, tag in clients
                                for r in o.recs("/upload", tag)],
                 time.monotonic() - t_closed))


def fault_big(t, proxy):
    o = t.o
    what = "7 client drops a 5 MB download"
    for run, n in RUNS:
        clients = []
        for i in range(n):
            tag = "big-%s%d" % (run, i)
            c = Client(proxy.port)
            c.send(get_bytes(o.port, "/big", tag))
            clients.append((c, tag))
        for c, tag in clients:
            H.check(c.read_at_least(256 * 1024, 8),
                    "%s (%s): got only %d bytes within 8s; head %r; %s"
                    % (what, tag, len(c.raw), c.raw[:300], o.summary("/big")))
            H.check(c.raw.startswith(b"HTTP/1.1 200"), "%s (%s): got %r"
                    % (what, tag, c.raw[:300]))
        t_closed = time.monotonic()
        for c, tag in clients:
            c.close()
        for c, tag in clients:
            done = H.wait_until(lambda: all(r["end"] is not None
                                            for r in o.recs("/big", tag)), 5.0)
            recs = o.recs("/big", tag)
            H.check(done and len(recs) == 1 and recs[0]["outcome"].startswith("aborted"),
                    "%s (%s): the origin connection should end (the proxy closes it) well"
                    " before the 5 MB are through; %s" % (what, tag, o.summary("/big")))
        H.log("%s: %s x%d -> origin %s, %.2fs after the client closed"
              % (what, run, n, [r["outcome"] for c, tag in clients
                                for r in o.recs("/big", tag)],
                 time.monotonic() - t_closed))


def test(t):
    proxy = start(t)
    failures = []
    case = case_runner(proxy, failures)

    case("6 POST abandoned mid-body", lambda: fault_upload(t, proxy))
    case("7 download abandoned", lambda: fault_big(t, proxy))

    # probe: nothing leaked so far
    case("probe", lambda: probe(t, proxy, "6, 7"))

    finish(t, proxy, failures)


if __name__ == "__main__":
    H.main(test, timeout=45)
