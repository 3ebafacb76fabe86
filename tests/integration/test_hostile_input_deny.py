#!/usr/bin/python3
"""Hostile request input: the default deny list (the deny rows of the hostile-input
table), GET and CONNECT to every non-global address: 403 with Proxy-Status
destination_ip_prohibited, nothing at the origin, and politeproxy_requests_total must
not move (denied before a slot is taken).

The rows run inside a private network namespace (the file re-runs itself under
`unshare -n` with its own proxy, origin and client), so a wrong proxy cannot send a
packet off the machine; skipped, with the reason, where that is impossible.

The rows, their fields and the checks every row gets (the answer, what reached the
origin, and that the proxy then still serves that host with no slot held):
hostile_input_table.py. Every failing row is collected; the summary lists them all, then
the test fails. A wrong proxy costs up to ~4 s per failing row (the 1.5 s answer wait,
the after-check), hence the 90 s ctest TIMEOUT of the hostile-input tests."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from hostile_input_checks import describe, raw_origin, record, report, run_checked  # noqa: E402
from hostile_input_table import ROWS  # noqa: E402

NETNS_ENV = "POLITEPROXY_HOSTILE_NETNS_OUT"


def start_netns_child(t):
    """Start this file under `unshare -n` for the deny rows. (Popen, out path) or
    (None, reason to skip)."""
    if os.geteuid() != 0:
        return None, "not root"
    if not (shutil.which("unshare") and shutil.which("ip")):
        return None, "unshare or ip not installed"
    probe = subprocess.run(["unshare", "-n", "true"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=10)
    if probe.returncode != 0:
        return None, "unshare -n failed: %s" % probe.stderr.decode().strip()
    out = os.path.join(t.workdir, "netns.json")
    cmd = ["unshare", "-n", "/bin/sh", "-c", 'ip link set lo up && exec "$@"', "sh",
           "/usr/bin/python3", os.path.abspath(__file__), "--proxy", t.binary]
    env = dict(os.environ, **{NETNS_ENV: out})
    with open(out + ".log", "wb") as log:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT, preexec_fn=H._pdeathsig)
    return p, out


def test_in_netns(t):
    """The child: the deny rows, results to the JSON file named by NETNS_ENV."""
    origin = raw_origin("deny")
    t.origins.append(origin)
    proxy = t.proxy(H.base_config(rate=1000, burst=1000), "deny-proxy")
    results = {}
    for row in ROWS:
        if row.group == "deny":
            problems, obs = run_checked(row, proxy, origin)
            results[row.name] = problems
            H.log("%s %s -> %s" % ("FAIL" if problems else "ok", row.name, describe(obs)))
    with open(os.environ[NETNS_ENV], "w") as f:
        json.dump(results, f)


def collect_netns(child, out, failures):
    rows = [r for r in ROWS if r.group == "deny"]
    if child is None:
        print("SKIP %d deny rows: %s" % (len(rows), out), flush=True)
        return
    try:
        child.wait(40)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(5)
    with open(out + ".log", "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            print("    netns| " + line)
    try:
        with open(out) as f:
            results = json.load(f)
    except (OSError, ValueError) as e:
        results = {}
        H.log("the network-namespace child wrote no results (%s), exit %s"
              % (e, child.returncode))
    for row in rows:
        record(failures, row, results.get(row.name, ["did not run in the namespace child"
                                                     " (exit %s)" % child.returncode]))


def test(t):
    failures = {}
    child, netns_out = start_netns_child(t)
    try:
        collect_netns(child, netns_out, failures)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(5)
    report(failures, "%d failure(s): the deny rows (of %d)"
           % (len(failures), len([r for r in ROWS if r.group == "deny"])))


if __name__ == "__main__":
    if os.environ.get(NETNS_ENV):
        H.main(test_in_netns, timeout=35)
    H.main(test, timeout=85)
