#!/usr/bin/python3
"""Memory of a parked request, side by side: each binary given parks N HTTP/1.1
requests (one per client connection, over 20 hosts at concurrency 1; the loopback
origin holds the 20 in flight for a minute) and the growth of its VmRSS over the
requests waiting is printed, with the ratio to the first binary.

    /usr/bin/python3 tests/bench/parked_memory.py --proxy build/politeproxy [--proxy OTHER ...] [--parked 2000]

One worker (the figure is per request, not per thread); the requests are a crawler's
usual shape (absolute-form GET, Host, User-Agent, Accept). Not part of ctest."""
import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness as H  # noqa: E402


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(t, binary, origin, parked):
    t.binary = binary
    cfg = H.base_config(concurrency=1, rate=1000, burst=1000)
    cfg["defaults"]["queue"] = {"max_waiting": 100000, "max_wait": "120s"}
    cfg["workers"] = 1
    proxy = t.proxy(cfg, name=os.path.basename(os.path.dirname(os.path.abspath(binary))) or "proxy")
    for h in range(20):  # every host's state exists before the baseline
        H.request(proxy, "http://p%d.test:%d/warm" % (h, origin.port))
    time.sleep(0.5)
    before = rss(proxy.pid)
    socks = []
    for i in range(parked):
        s = socket.create_connection(("127.0.0.1", proxy.port))
        s.sendall(("GET http://p%d.test:%d/x?delay=60&i=%d HTTP/1.1\r\nHost: p%d.test\r\n"
                   "User-Agent: Mozilla/5.0 (compatible; bench-crawler/1.0)\r\nAccept: */*\r\n\r\n"
                   % (i % 20, origin.port, i, i % 20)).encode())
        socks.append(s)
    waiting = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        waiting = sum(h["waiting"] for h in json.loads(proxy.admin_get("/hosts")[2]))
        if waiting >= parked - 20:
            break
        time.sleep(0.2)
    time.sleep(1)
    grown = rss(proxy.pid) - before
    for s in socks:
        s.close()
    proxy.stop()
    return grown, waiting


if __name__ == "__main__":
    # H.main exits: the figures are printed from an atexit hook, after its PASS line.
    import atexit

    def report():
        if not _results:
            return
        first = _results[0][1] / max(1, _results[0][2])
        for binary, grown, waiting in _results:
            per = grown / max(1, waiting)
            print("parked_memory: %-40s %6d waiting  %8.0f B per parked request  (%.2fx the first)"
                  % (binary, waiting, per, per / first if first else 0))

    _results = []
    atexit.register(report)
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--proxy", action="append", required=True)
    ap.add_argument("--parked", type=int, default=2000)
    args = ap.parse_args()

    def run(t):
        origin = t.origin()
        for binary in args.proxy:
            _results.append((binary,) + measure(t, binary, origin, args.parked))

    H.main(run, timeout=60 + 30 * len(args.proxy), argv=["--proxy", args.proxy[0]])
