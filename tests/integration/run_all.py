#!/usr/bin/python3
"""Run every integration test without CMake:
    /usr/bin/python3 tests/integration/run_all.py --proxy build/politeproxy [names...]
Prints one line per test and a closing 'N passed, N failed'."""
import argparse
import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", default=os.environ.get("POLITEPROXY_BIN"))
    ap.add_argument("names", nargs="*", help="test names (default: all)")
    a = ap.parse_args()
    if not a.proxy:
        ap.error("pass --proxy PATH or set POLITEPROXY_BIN")
    tests = sorted(glob.glob(os.path.join(HERE, "test_*.py")))
    if a.names:
        tests = [t for t in tests if any(n in os.path.basename(t) for n in a.names)]
    passed, failed = [], []
    for t in tests:
        name = os.path.basename(t)[5:-3]
        t0 = time.monotonic()
        try:
            r = subprocess.run([sys.executable, t, "--proxy", a.proxy],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=90)
            rc, out = r.returncode, r.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            rc, out = -1, (e.stdout or b"").decode("utf-8", "replace") + "\n(timeout)"
        dt = time.monotonic() - t0
        if rc == 0:
            passed.append(name)
            print("PASS %-20s %5.1fs" % (name, dt), flush=True)
        else:
            failed.append(name)
            print("FAIL %-20s %5.1fs (exit %d)" % (name, dt, rc), flush=True)
            print("\n".join("    " + l for l in out.rstrip().splitlines()), flush=True)
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
