"""Judging and pacing an integration test: the failure type and check(), the log every
line of a test goes to (seconds since the test started), wait_until() for polling, and
SLOW, the factor sanitizer builds stretch the harness's own time limits by."""
import os
import time

# Sanitizer builds run slower (scripts/test-sanitizers.sh sets POLITEPROXY_SLOW): the
# hard per-test timeout and the start-up wait stretch by this factor; assertions do not.
SLOW = float(os.environ.get("POLITEPROXY_SLOW", "1"))


class TestFailure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def log(*a):
    print("[%7.3f]" % (time.monotonic() - _T0), *a, flush=True)


_T0 = time.monotonic()


def wait_until(pred, timeout, interval=0.02, what="condition"):
    """Poll pred() until it returns a truthy value; return it (or the last value)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            return last
        time.sleep(interval)
