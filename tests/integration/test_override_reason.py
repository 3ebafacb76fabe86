#!/usr/bin/python3
"""A host override raising concurrency to 5 (default 2) with a `reason` gets exactly 5
in flight at the origin under 30 concurrent slow requests; the same override without
a `reason` makes --check-config exit 1 naming the file, the line and the host."""
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "wide.test"
N = 30


def host_entry_lines(text, host):
    """1-based line numbers spanned by the hosts entry `host` in YAML text."""
    root = yaml.compose(text)
    for k, v in root.value:
        if k.value == "hosts":
            for hk, hv in v.value:
                if hk.value == host:
                    end = hv.end_mark  # 0-based; column 0 = start of the next line
                    last = end.line + (1 if end.column > 0 else 0)
                    return set(range(hk.start_mark.line + 1, last + 1))
    raise AssertionError("host %s not in generated config" % host)


def test(t):
    origin = t.origin()
    override = {"concurrency": 5, "reason": "integration test: documented limit 5"}
    good = H.base_config(hosts={HOST: dict(override)})

    rc, out, err, path, _ = t.check_config(good, "good")
    H.check(rc == 0, "--check-config of a valid config exited %d; stderr:\n%s" % (rc, err))
    H.check(HOST in out, "--check-config did not print %s in its per-host table; stdout:\n%s"
            % (HOST, out))

    proxy = t.proxy(good)
    url = "http://%s:%d/w?delay=0.3" % (HOST, origin.port)
    results = H.concurrent(proxy, [url + "&i=%d" % i for i in range(N)], timeout=30)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests did not get 200: %s" % (len(bad), bad[:5]))
    st = origin.host(HOST)
    H.log("origin saw peak=%d count=%d" % (st["peak"], st["count"]))
    H.check(st["count"] == N, "origin got %d requests, expected %d" % (st["count"], N))
    H.check(st["peak"] == 5, "origin's peak for %s was %d, expected exactly 5 (override)"
            % (HOST, st["peak"]))

    # the same override without a reason is rejected
    no_reason = H.base_config(hosts={"other.test": {"concurrency": 1},
                                     HOST: {"concurrency": 5}})
    rc, out, err, path, text = t.check_config(no_reason, "no-reason")
    H.log("--check-config without reason: exit %d, stderr: %s" % (rc, err.strip()))
    H.check(rc == 1, "--check-config of an override raising concurrency without a reason"
            " exited %d, expected 1; stdout:\n%s\nstderr:\n%s" % (rc, out, err))
    H.check(HOST in err, "--check-config's error does not name the host %s; stderr:\n%s"
            % (HOST, err))
    H.check(path in err or os.path.basename(path) in err,
            "--check-config's error does not name the file %s; stderr:\n%s" % (path, err))
    lines = host_entry_lines(text, HOST)
    numbers = {int(n) for n in re.findall(r"\d+", err.replace(path, ""))}
    H.check(numbers & lines,
            "--check-config's error names none of the lines %s of the %s entry; "
            "stderr:\n%s\nconfig:\n%s" % (sorted(lines), HOST, err, text))

    # lowering needs no reason
    rc, out, err, _, _ = t.check_config(H.base_config(hosts={HOST: {"concurrency": 1}}),
                                        "lower")
    H.check(rc == 0, "--check-config rejected an override that only lowers concurrency"
            " (exit %d); stderr:\n%s" % (rc, err))


if __name__ == "__main__":
    H.main(test, timeout=40)
