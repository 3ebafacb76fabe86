#!/usr/bin/python3
"""Hostile request input: the rows of the hostile-input table about a request's head,
one after the other on one proxy: the request line, target and Host (line), field names
and values (field), the size limits (limit), TRACE and OPTIONS (method) and the CONNECT
authority (connect).

The differential (hostile_input_differential.py): the rows of the groups line, field,
limit and method are also sent through HAProxy (`haproxy -db`) to the same kind of raw
origin; each side's outcome is "refused" (an answer >= 400, no complete request at the
origin) or "forwarded" with the framing the origin saw. Every difference is printed;
one not in KNOWN_DIFFERENCES, or an entry there that no longer differs, fails the
test. Skipped when haproxy is not installed.

The rows, their fields and the checks every row gets (the answer, what reached the
origin, and that the proxy then still serves that host with no slot held):
hostile_input_table.py. Every failing row is collected; the summary lists them all, then
the test fails. A wrong proxy costs up to ~4 s per failing row (the 1.5 s answer wait,
the after-check), hence the 90 s ctest TIMEOUT of the hostile-input tests.

The framing rows (Transfer-Encoding, Content-Length, chunked bodies):
test_hostile_input_framing.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from hostile_input_differential import run_groups  # noqa: E402

GROUPS = ("line", "field", "limit", "method", "connect")


def test(t):
    run_groups(t, GROUPS)


if __name__ == "__main__":
    H.main(test, timeout=85)
