#!/usr/bin/python3
"""Hostile request input: one origin is one host key, however its address is spelled
(the hostkey rows of the hostile-input table).

The ten spellings of 127.0.0.1 at once, the origin holding each request 0.6 s,
127.0.0.1 configured with concurrency 1: the origin's peak in flight must be 1, each
request reaches it with "Host: 127.0.0.1:PORT", and /hosts and the `host` label of
politeproxy_requests_total show the one key "127.0.0.1"; [::1] and [0:0:0:0:0:0:0:1]
must both show as key "::1" (the origin listens on IPv4 only, so their answer is not
checked). Then a normal GET is served and no slot is held.

The rows, their fields and the checks every row gets (the answer, what reached the
origin, and that the proxy then still serves that host with no slot held):
hostile_input_table.py. Every failing row is collected; the summary lists them all, then
the test fails. A wrong proxy costs up to ~4 s per failing row (the 1.5 s answer wait,
the after-check), hence the 90 s ctest TIMEOUT of the hostile-input tests."""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from hostile_input_checks import (  # noqa: E402
    Obs, check_after, check_answer, check_origin, describe, raw_origin, record, report,
    request_bytes, send, start_proxy)
from hostile_input_table import ANY, FWD, HOLD, ROWS, SPELLINGS, V6_SPELLINGS, Row  # noqa: E402


def send_all(port, datas, timeout):
    """send() each of datas on its own connection, all at once; results in order."""
    results = [None] * len(datas)

    def one(i):
        results[i] = send(port, datas[i], timeout)
    threads = [threading.Thread(target=one, args=(i,), daemon=True)
               for i in range(len(datas))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout + 10)
    return [r or (None, "client thread hung", None, False, b"") for r in results]


def run_hostkeys(proxy, origin, failures):
    """The spellings of 127.0.0.1 at once (one key: the origin sees them one at a time),
    then [::1] and its long form (one key ::1, whatever they are answered)."""
    rows = [r for r in ROWS if r.group == "hostkey" and r.answer == FWD]
    mark = origin.mark()
    results = send_all(proxy.port, [request_bytes(r, origin.port) for r in rows],
                       timeout=HOLD * len(rows) + 5)
    got, reqs = origin.since(mark)
    for i, row in enumerate(rows):
        mine = [r for r in reqs if r["target"] == "/hold?k=%d" % i]
        obs = Obs(*results[i], got, mine, set())
        record(failures, row, check_answer(row, obs) + check_origin(row, obs, origin.port))
    peak = H.overlap_peak([{"start": r["t0"], "end": r["t1"]} for r in reqs])
    group = []
    if peak != 1:
        group.append("the origin's peak in flight over the %d spellings was %d, expected 1"
                     " (one host key, concurrency 1)" % (len(rows), peak))
    group += check_keys(proxy, SPELLINGS, "127.0.0.1")

    # the origin listens on IPv4 only: [::1] is refused (and may pause its host), so
    # send both at once and take whatever answer they get
    v6 = [r for r in ROWS if r.group == "hostkey" and r.answer == ANY]
    results = send_all(proxy.port, [request_bytes(r, origin.port) for r in v6], timeout=2)
    answers = []
    for row, res in zip(v6, results):
        obs = Obs(*res, {}, [], set())
        answers.append("%s -> %s (Proxy-Status %r)" % (
            row.name, describe(obs), obs.resp and obs.resp.header("Proxy-Status")))
        H.log(answers[-1])
        record(failures, row, check_answer(row, obs) if obs.resp is not None else [])
    group += ["%s; answers: %s (allow_destinations has ::1/128)" % (p, "; ".join(answers))
              for p in check_keys(proxy, V6_SPELLINGS, "::1")]
    group += check_after(proxy, origin, "hostkeys.test")
    record(failures, Row("hostkey group", "hostkey", b"", ANY, None), group)


def key_forms(spelling):
    s = spelling.lower()
    return {s, s.strip("[]"), s.rstrip("."), s.strip("[]").rstrip(".")}


def check_keys(proxy, spellings, key):
    """/hosts and the requests_total host label show `key` and no other spelling."""
    out = []
    others = set().union(*map(key_forms, spellings)) - {key}
    status, _, body = proxy.admin_get("/hosts")
    keys = [h.get("key") for h in json.loads(body.decode())] if status == 200 else []
    if status != 200:
        out.append("GET /hosts answered %d" % status)
    labels = {dict(ls).get("host") for ls in
              H.mseries(proxy.metrics(), "politeproxy_requests_total")}
    if keys.count(key) != 1 and key not in labels:
        def shown(ks):  # the address-like keys, not the rows' *.test names
            return sorted(str(k) for k in ks if not str(k).endswith(".test"))
        out.append("key %r is neither once in /hosts (address keys: %s) nor a"
                   " requests_total host label (%s)" % (key, shown(keys), shown(labels)))
    if key in keys and keys.count(key) != 1:
        out.append("/hosts lists key %r %d times" % (key, keys.count(key)))
    wrong = sorted((set(keys) | labels) & others)
    if wrong:
        out.append("other spellings of %s became their own host keys: %s" % (key, wrong))
    return out


def test(t):
    failures = {}
    origin = raw_origin("hostile")
    t.origins.append(origin)
    proxy = start_proxy(t, origin)
    run_hostkeys(proxy, origin, failures)
    report(failures, "%d failure(s): the hostkey rows (of %d) and the group"
           % (len(failures), len([r for r in ROWS if r.group == "hostkey"])))


if __name__ == "__main__":
    H.main(test, timeout=85)
