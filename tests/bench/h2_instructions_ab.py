#!/usr/bin/python3
"""Instructions per HTTP/2 stream, counted by callgrind, for two politeproxy binaries:
instructions_ab.py's deterministic A/B for h2_bench's set-up (CPU per request there moves
by 10-30% between repeats on this machine; instruction counts move by under 0.1%).

    /usr/bin/python3 tests/bench/h2_instructions_ab.py BEFORE AFTER [--back-end h2|h1] [--rounds 2]

Each binary runs under `valgrind --tool=callgrind --instr-atstart=no` with h2_bench's
config (the cost config, 1000 streams per client connection; `--back-end h2`: one h2c
session to nginx, `h1`: its HTTP/1.1 pool) in front of h2_bench's nginx; h2load (4
connections x 100 streams, 1 KiB) warms it up, then instrumentation is on for
--requests streams. Under valgrind the proxy is the bottleneck, so every stream finds
the others queued: its batches are larger than in a real run. User-space instructions
(valgrind's malloc stands in for tcmalloc) over the streams h2load completed; the
binaries alternate for --rounds rounds and the medians are printed."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2_bench as H  # noqa: E402
from bench_http import free_port  # noqa: E402
from instructions_ab import callgrind_total, keep_dir  # noqa: E402


def measure(work, log, binary, h2, origin_port, requests, keep):
    port, admin = free_port(), free_port()
    cfg = os.path.join(work, "politeproxy.yaml")
    with open(cfg, "w") as f:
        f.write(H.politeproxy_config(port, admin, h2))
    out = os.path.join(keep or work, os.path.basename(binary) + ".callgrind")
    proc = H.start(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + out, binary,
                    "--config", cfg], H.PROXY_CPU, log)
    try:
        H.wait_port(port, proc, timeout=60)
        subprocess.run(H.h2load(port, origin_port, 4000), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=300)  # warm-up, not counted
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
        load = subprocess.run(H.h2load(port, origin_port, requests), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=600).stdout
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
    finally:
        H.stop(proc)
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", load).group(1))
    return callgrind_total(out) / max(done, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--back-end", choices=("h2", "h1"), default="h2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files there (for callgrind_annotate)")
    a = ap.parse_args()
    a.keep = keep_dir(a.keep)
    H.ensure_tools()
    binaries = [os.path.abspath(a.before), os.path.abspath(a.after)]
    per_stream = {b: [] for b in binaries}
    with tempfile.TemporaryDirectory(prefix="pp-h2ab-") as work:
        with open(os.path.join(work, "processes.log"), "wb") as log:
            nginx, h1_port, h2_port = H.start_origin(work, log)
            try:
                for _ in range(a.rounds):
                    for b in binaries:
                        per_stream[b].append(measure(work, log, b, a.back_end == "h2",
                                                     h2_port if a.back_end == "h2" else h1_port, a.requests, a.keep))
                        print("%s: %.0f instructions per stream" % (b, per_stream[b][-1]), flush=True)
            finally:
                H.stop(nginx)
    print("| binary | back end | instructions per stream (median of %d) |" % a.rounds)
    print("|---|---|---:|")
    for name, b in zip(("before", "after"), binaries):
        print("| %s (%s) | %s | %.0f |" % (name, b, a.back_end, statistics.median(per_stream[b])))
    print("after/before: %.3f" % (statistics.median(per_stream[binaries[1]]) / statistics.median(per_stream[binaries[0]])))


if __name__ == "__main__":
    main()
