"""One origin-desync test's run (test_origin_desync_bodiless.py,
test_origin_desync_1xx.py): its cases, one after the other, through politeproxy (one
worker: one origin pool), each checked against politeproxy's contract (expect), then the
same client sequence through HAProxy, and both sides' outcomes compared.

The HAProxy differential: `haproxy -db`, one thread, one frontend and one backend per
case, the backend's one server being the case's own raw origin, `http-reuse always`,
keep-alive to the server: sequential client connections share one pooled server
connection, as they do in politeproxy with one worker. A table of both sides is printed.
A difference not in the test's KNOWN_DIFFERENCES (which pins both sides' values and says
why), or an entry there that no longer differs as recorded, fails the test. Skipped
(with the reason printed) when haproxy is not installed or does not start."""
import os
import shutil
import socket
import subprocess
import sys
import time

import harness as H
from origin_desync_checks import ASPECTS, expect, outcome
from origin_desync_exchange import SIDE_BUDGET, exchange, make_origin

HAPROXY_GLOBAL = """global
  maxconn 200
  nbthread 1
defaults
  mode http
  option http-keep-alive
  timeout connect 2s
  timeout client 5s
  timeout server 4s
  timeout http-request 2s
  timeout http-keep-alive 2s
"""

HAPROXY_CASE = """frontend fe%(i)d
  bind 127.0.0.1:%(port)d
  default_backend be%(i)d
backend be%(i)d
  http-reuse always
  server origin 127.0.0.1:%(origin)d
"""


def start_haproxy(t, exe, origins):
    """HAProxy with one frontend per case, in front of that case's origin:
    (process, [port per case]) or (None, reason)."""
    # Distinct ports (free_port never repeats one): HAProxy binds with SO_REUSEPORT, so two
    # frontends on one port would share its connections.
    ports = [H.free_port() for _ in origins]
    cfg = os.path.join(t.workdir, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(HAPROXY_GLOBAL + "".join(HAPROXY_CASE % {"i": i, "port": port, "origin": o.port}
                                         for i, (port, o) in enumerate(zip(ports, origins))))
    log = os.path.join(t.workdir, "haproxy.log")
    with open(log, "wb") as f:
        p = subprocess.Popen([exe, "-db", "-f", cfg], stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT, preexec_fn=H._pdeathsig)
    t.haproxy_proc = p

    def up():
        if p.poll() is not None:
            return True
        for port in ports:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                return False
        return True
    H.wait_until(up, 5)
    if p.poll() is not None or not up():
        with open(log, "rb") as f:
            return None, "haproxy did not start (exit %s): %s" % (p.poll(), f.read()[-500:])
    H.log("haproxy %d: %d frontends on 127.0.0.1, one per case" % (p.pid, len(ports)))
    return p, ports


def compare(pp, ha, cases, known_differences):
    """Print both sides per case of `cases`; return the problems (differences not in
    `known_differences`, the test's KNOWN_DIFFERENCES, and stale or changed entries of it)."""
    problems = []
    width = max(len(c.name) for c in cases)
    print("\n==== origin desync: politeproxy | haproxy ====", flush=True)
    for case in cases:
        if case.name not in pp or case.name not in ha:
            continue
        print("case %s" % case.name)
        for aspect in ASPECTS:
            a, b = pp[case.name][aspect], ha[case.name][aspect]
            key = (case.name, aspect)
            known = known_differences.get(key)
            if a == b:
                mark = ""
                if known:
                    problems.append("%s / %s: in KNOWN_DIFFERENCES but both now %r"
                                    % (case.name, aspect, a))
                    mark = "  <- STALE known difference"
            elif known is None:
                mark = "  <- DIFF, NOT in KNOWN_DIFFERENCES"
                problems.append("%s / %s: politeproxy %r, haproxy %r (not in"
                                " KNOWN_DIFFERENCES)" % (case.name, aspect, a, b))
            elif (a, b) != known[:2]:
                mark = "  <- DIFF, but KNOWN_DIFFERENCES has %r / %r" % known[:2]
                problems.append("%s / %s: politeproxy %r, haproxy %r; KNOWN_DIFFERENCES"
                                " recorded %r / %r" % ((case.name, aspect, a, b) + known[:2]))
            else:
                mark = "  <- known: " + known[2]
            print("  %-13s %-*s | %s%s" % (aspect, max(width, 28), a, b, mark))
    sys.stdout.flush()
    names = {c.name for c in cases}
    for key in known_differences:
        if key[0] not in names or key[1] not in ASPECTS:
            problems.append("%s / %s: in KNOWN_DIFFERENCES but there is no such case and"
                            " aspect" % key)
    return problems


def run_side(side, cases, ports, origins, on_case):
    """Every case, one after the other, through the proxy port of the case (ports[i]
    for cases[i]) in front of the case's origin (origins[i]); on_case(case, run, origin)
    after each. Returns the names of the cases not started within SIDE_BUDGET."""
    deadline = time.monotonic() + SIDE_BUDGET
    not_run = []
    for case, port, o in zip(cases, ports, origins):
        if time.monotonic() >= deadline:
            not_run.append(case.name)
            continue
        on_case(case, exchange(port, case, o, deadline), o)
    if not_run:
        H.log("%s: cases not run (the ones before took over %gs): %s"
              % (side, SIDE_BUDGET, ", ".join(not_run)))
    return not_run


def run_cases(t, cases, known_differences):
    """The test: every case of `cases` through politeproxy and HAProxy; fails with the
    failures of all of them."""
    t.haproxy_proc = None
    cfg = H.base_config(concurrency=2, rate=100, burst=100,
                        timeouts={"response_headers": "4s"})
    # one worker: one origin pool, so sequential client connections share the pooled
    # origin connection (with two, connections alternate between two pools)
    cfg["workers"] = 1
    t.p = t.proxy(cfg)
    pp_origins = [make_origin(t, c.label, c.first) for c in cases]
    failures = []
    pp_out = {}

    def pp_case(case, run, o):
        fails = expect(case, run, o)
        pp_out[case.name] = outcome(case, run, o)
        if fails:
            H.log("case %s: FAILED (%d):\n    %s" % (case.name, len(fails), "\n    ".join(fails)))
            failures.extend("case %s: %s" % (case.name, f) for f in fails)
        else:
            H.log("case %s: ok (%s)" % (case.name, o.summary()))
        H.check(t.p.alive(), "the proxy died during case %s" % case.name)

    for name in run_side("politeproxy", cases, [t.p.port] * len(cases), pp_origins, pp_case):
        failures.append("case %s: not run (time budget)" % name)

    try:
        exe = shutil.which("haproxy")
        if exe:
            ha_origins = [make_origin(t, "haproxy-" + c.label, c.first) for c in cases]
            ha, ha_ports = start_haproxy(t, exe, ha_origins)
        else:
            ha, ha_ports = None, "haproxy is not installed (Debian package haproxy)"
        if ha is None:
            print("SKIP haproxy differential: %s" % ha_ports, flush=True)
        else:
            ha_out = {}

            def ha_case(case, run, o):
                ha_out[case.name] = outcome(case, run, o)
                H.log("haproxy case %s: %s (%s)" % (case.name, dict(ha_out[case.name]),
                                                    o.summary()))
            # the same sequence; each case has its own frontend (and port)
            for name in run_side("haproxy", cases, ha_ports, ha_origins, ha_case):
                failures.append("haproxy differential: case %s not run (time budget)" % name)
            failures.extend("haproxy differential: " + p
                            for p in compare(pp_out, ha_out, cases, known_differences))
    finally:
        p = t.haproxy_proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(5)
    failed_cases = sorted({f.split(":")[0] for f in failures})
    H.check(not failures, "%d failure(s) in %s (of %d cases):\n  %s"
            % (len(failures), ", ".join(failed_cases), len(cases), "\n  ".join(failures)))
