#!/usr/bin/python3
"""conf/grafana/politeproxy.json against a real Prometheus (Debian's `prometheus`) that
scrapes a running proxy (with a fleet store, so the fleet panels have data) every second:
  - the file is a Grafana dashboard: a uid, a title, the `host` variable over
    label_values(politeproxy_host_in_flight, host), panels on grid positions, and every
    query through the ${DS_PROMETHEUS} data source with a refId;
  - every query (with $host = .* and $__rate_interval = 15s) returns at least one series
    with a non-zero number (the fleet's degraded seconds and lost leases may be 0), while
    traffic runs: several hosts, one answering 429 (throttled share,
    a limit collapse, a pause), one with requests waiting, and one with a full queue
    (a rejection); and two origins routed through a parent proxy (tinyproxy, which
    closes its connection after each answer, so every request through it connects
    anew), one of them holding a slow request, so the parent panels have data too; and
    overrides from the registry (h0.test) and from the control API (h1.test).
Without prometheus, redis-server or tinyproxy the test says so and is skipped (exit 0):
scripts/install-deps.sh installs them."""
import json
import math
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import parent_proxies  # noqa: E402
from control_api import api, token_file  # noqa: E402
from fleet_common import fleet_config  # noqa: E402

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "conf", "grafana", "politeproxy.json")
RATE_INTERVAL = "15s"


def queries(dash):
    """(panel title, refId, expr) of every query, checked for shape on the way."""
    H.check(dash.get("uid") and dash.get("title"), "the dashboard has no uid or title")
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    H.check("host" in variables and "label_values(politeproxy_host_in_flight, host)" in json.dumps(variables["host"]),
            "the dashboard has no host variable over politeproxy_host_in_flight: %s" % list(variables))
    H.check(variables.get("DS_PROMETHEUS", {}).get("type") == "datasource", "no DS_PROMETHEUS data source variable")
    out = []
    for p in dash["panels"]:
        H.check({"x", "y", "w", "h"} <= set(p.get("gridPos", {})), "panel %r has no grid position" % p.get("title"))
        if p["type"] == "row":
            continue
        H.check(p.get("datasource", {}).get("uid") == "${DS_PROMETHEUS}", "panel %r: data source %r"
                % (p["title"], p.get("datasource")))
        H.check(p.get("targets"), "panel %r has no query" % p["title"])
        for t in p["targets"]:
            H.check(t.get("refId") and t.get("expr"), "panel %r: a target without refId or expr: %r" % (p["title"], t))
            out.append((p["title"], t["refId"], t["expr"]))
    return out


# Queries that are 0 in a healthy run with the store up (no data would still fail them).
MAY_BE_ZERO = {("Fleet store state", "B"), ("Fleet store state", "C")}


def has_number(result, nonzero):
    """A series with a finite value (non-zero where the traffic should have made one)."""
    for series in result:
        v = float(series["value"][1])
        if not math.isnan(v) and not math.isinf(v) and (v != 0 or not nonzero):
            return True
    return False


def test(t):
    for tool in ("prometheus", "redis-server"):
        if not shutil.which(tool):
            print("SKIP grafana dashboard: no %s on PATH (scripts/install-deps.sh installs it)" % tool, flush=True)
            return
    if not parent_proxies.available("tinyproxy"):
        print("SKIP grafana dashboard: no tinyproxy (scripts/install-deps.sh installs it)", flush=True)
        return
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = queries(dash)
    H.log("%d queries in %d panels" % (len(exprs), len(dash["panels"])))

    origin = t.origin()
    store = t.redis()
    cfg = fleet_config(store, concurrency=2, rate=50,
                       defaults={"queue": {"max_waiting": 2, "max_wait": "20s"},
                                 "backoff": {"initial": "1s", "max": "2s", "jitter": 0}})
    cfg["defaults"]["adaptive"] = {"enabled": True}  # limit changes: a 429 collapses the limit
    # The parent panels: the origins on 127.0.0.2 and 127.0.0.3 go through a parent
    # (tinyproxy resolves no *.test name, so they are addressed by IP literals; every
    # *.test name resolves to 127.0.0.1 and stays direct). 127.0.0.3 holds a slow request,
    # so the parent carries one the whole time.
    via = t.origin(address="127.0.0.2")
    held = t.origin(address="127.0.0.3")
    parent = t.parent("tinyproxy")
    cfg["parents"] = {"pool-a": {"url": "http://127.0.0.1:%d" % parent.port}}
    cfg["routes"] = [{"match": ["127.0.0.2", "127.0.0.3"], "via": ["pool-a"]}]
    cfg["hosts"] = {"h0.test": {"concurrency": 1, "reason": "registry entry"}}
    cfg["admin"] = {"token_file": token_file(t.workdir)}
    proxy = t.proxy(cfg)
    status, _, body = api(proxy, "PUT", "/api/hosts/h1.test/override", {"rate": 5, "reason": "operator"})
    H.check(status == 200, "the API override for the overrides panels: %s %s" % (status, body))
    prom = t.prometheus(["127.0.0.1:%d" % proxy.admin_port])

    stop = threading.Event()

    def traffic():
        i = 0
        while not stop.is_set():
            i += 1
            urls = ["http://h%d.test:%d/ok?i=%d" % (n, origin.port, i) for n in range(4)]
            urls.append("http://throttled.test:%d/t?status=429&retry_after=1&i=%d" % (origin.port, i))
            # full.test's queue is full from the start: each of these is refused (a rejection).
            urls.append("http://full.test:%d/refused?i=%d" % (origin.port, i))
            urls.append("http://127.0.0.2:%d/via?i=%d" % (via.port, i))  # through the parent
            H.concurrent(proxy, urls, timeout=20)
            stop.wait(0.3)

    # Two slow requests hold the slots of full.test and two wait: its queue (2) is full,
    # and every further request to it is refused while the traffic runs.
    bg = H.Background(proxy, ["http://full.test:%d/slow?delay=30&i=%d" % (origin.port, i) for i in range(4)], timeout=40)
    H.check(H.wait_until(lambda: (proxy.hosts().get("full.test") or {}).get("waiting") == 2, 5.0),
            "full.test never had 2 requests waiting: %s" % proxy.hosts().get("full.test"))
    r = H.request(proxy, "http://full.test:%d/refused" % origin.port)
    H.check(r.status == 503, "a fifth request to full.test (queue of 2 full) should get 503: %r" % r)
    held_bg = H.Background(proxy, ["http://127.0.0.3:%d/slow?delay=30" % held.port], timeout=40)
    H.check(H.wait_until(lambda: (proxy.hosts().get("127.0.0.3") or {}).get("in_flight") == 1, 5.0),
            "the slow request through the parent is not in flight: %s" % proxy.hosts().get("127.0.0.3"))
    loop = threading.Thread(target=traffic, daemon=True)
    loop.start()

    prom.wait_for_scrapes(8)
    time.sleep(2)
    empty = []
    try:
        for title, ref, expr in exprs:
            q = expr.replace("$host", ".*").replace("$__rate_interval", RATE_INTERVAL)
            result = prom.query(q)
            ok = has_number(result, (title, ref) not in MAY_BE_ZERO)
            H.log("%-28s %s: %d series%s" % (title, ref, len(result), "" if ok else " (no data, or all 0)"))
            if not ok:
                empty.append("%s (%s): %s -> %s" % (title, ref, q, result))
    finally:
        stop.set()
        loop.join(30)
    H.check(not empty, "%d dashboard queries return no data against a scraped proxy:\n  %s"
            % (len(empty), "\n  ".join(empty)))
    del bg, held_bg  # the slow requests are answered when the proxy stops


if __name__ == "__main__":
    H.main(test, timeout=100)
