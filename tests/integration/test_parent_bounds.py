#!/usr/bin/python3
"""Politeness stays on the destination through parent proxies (two real Squids):
- round_robin over two parents, host concurrency 2: the origin's own peak in flight for
  the host is exactly 2, not 2 per parent, and both parents carried requests; a name
  only DNS resolves takes them in turn too;
- by_host: every request for one host goes through one parent (the Via the origin saw),
  and the hosts spread over both;
- max_connections 2 on a parent: across six hosts the origin sees at most 2 requests at
  once through it (the rest wait for a turn after their slot and token), and a request
  that waits longer than queue.max_wait for a turn is answered 503 naming the parent;
- a parent killed mid-run: its requests in flight fail once (502 naming it as next-hop),
  every later request goes through the other parent within the same request (200), it is
  marked down (parent_up 0) after fail_after of its own failures; restarted, it carries
  requests again once retry_after has passed (parent_up 1)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import parent_proxies  # noqa: E402

HOSTS = ["h%d.test" % i for i in range(12)]


def parent_of(result):
    """The Squid that carried a request, from the Via the origin echoed ("squid-PORT")."""
    via = ", ".join(v for k, v in json.loads(result.body)["headers"] if k.lower() == "via")
    return via.split("squid-")[1].split(" ")[0] if "squid-" in via else None


def config(first, second, pick="round_robin", **parent):
    cfg = H.base_config(concurrency=2, rate=1000, burst=1000)
    cfg["parents"] = {"p1": dict({"url": first.url}, **parent), "p2": dict({"url": second.url}, **parent)}
    cfg["routes"] = [{"match": ["*.test", "localhost"], "via": ["p1", "p2"], "pick": pick}]
    return cfg


def test(t):
    parent_proxies.require("squid")
    origin = t.origin()
    names = {h: "127.0.0.1" for h in HOSTS + ["rr.test", "localhost"]}
    first, second = t.parent("squid", names=names), t.parent("squid", names=names)

    # round_robin: one bound for the host, whichever parent carries each request.
    proxy = t.proxy(config(first, second), name="rr")
    results = H.concurrent(proxy, ["http://rr.test:%d/rr?delay=0.2&i=%d" % (origin.port, i) for i in range(20)])
    H.check(all(r.status == 200 for r in results), "round_robin: %s" % H.summarize(results))
    carried = {parent_of(r) for r in results}
    st = origin.host("rr.test")
    H.log("round_robin: origin peak %d of 20, parents %s" % (st["peak"], sorted(carried)))
    H.check(st["peak"] == 2, "the origin saw %d at once for rr.test: the bound is 2 across parents" % st["peak"])
    H.check(carried == {str(first.port), str(second.port)}, "both parents should carry requests: %s" % carried)
    # A name only DNS resolves (no resolve: entry) is looked up before its parent is
    # picked; one after another, its requests still take the parents in turn.
    turns = [parent_of(H.request(proxy, "http://localhost:%d/dns?i=%d" % (origin.port, i))) for i in range(4)]
    H.check(turns[0] != turns[1] and turns[0] == turns[2] and turns[1] == turns[3],
            "round_robin for a name looked up in DNS: %s" % turns)
    proxy.stop()

    # by_host: one parent per host key.
    proxy = t.proxy(config(first, second, pick="by_host"), name="by-host")
    results = H.concurrent(proxy, ["http://%s:%d/bh?i=%d" % (h, origin.port, i) for h in HOSTS for i in range(3)])
    H.check(all(r.status == 200 for r in results), "by_host: %s" % H.summarize(results))
    per_host = {}
    for h, r in zip([h for h in HOSTS for _ in range(3)], results):
        per_host.setdefault(h, set()).add(parent_of(r))
    H.check(all(len(p) == 1 for p in per_host.values()), "by_host: a host went through two parents: %s" % per_host)
    H.check(len(set().union(*per_host.values())) == 2, "by_host: 12 hosts all on one parent: %s" % per_host)
    H.log("by_host: %s" % {h: next(iter(p)) for h, p in per_host.items()})
    proxy.stop()

    # max_connections: requests and tunnels a parent carries at once, across hosts.
    cfg = config(first, second, max_connections=2)
    cfg["routes"] = [{"match": ["*.test"], "via": ["p1"]}]
    proxy = t.proxy(cfg, name="turns")
    origin.reset()
    results = H.concurrent(proxy, ["http://%s:%d/turn?delay=0.3" % (h, origin.port) for h in HOSTS[:6]])
    H.check(all(r.status == 200 for r in results), "max_connections 2: %s" % H.summarize(results))
    records = [rec for h in HOSTS[:6] for rec in origin.host(h)["requests"]]
    H.check(H.overlap_peak(records) == 2, "through a parent with max_connections 2 the origin saw %d at once"
            % H.overlap_peak(records))
    proxy.stop()
    cfg["defaults"]["queue"]["max_wait"] = "200ms"
    proxy = t.proxy(cfg, name="turns-wait")
    results = H.concurrent(proxy, ["http://%s:%d/turn?delay=1" % (h, origin.port) for h in HOSTS[:4]])
    waited_out = [r for r in results if r.status == 503]
    H.check(len(waited_out) == 2 and all('next-hop="p1"' in (r.header("Proxy-Status") or "") for r in waited_out),
            "2 of 4 should wait out queue.max_wait for a turn at p1 (503 next-hop): %s" % H.summarize(results))
    H.log("max_connections 2: origin peak 2 across 6 hosts; past queue.max_wait: 503 next-hop=p1")
    proxy.stop()

    # A parent killed mid-run, then restarted.
    cfg = config(first, second, retry_after="1s", fail_after=2)
    cfg["defaults"]["concurrency"] = 8
    proxy = t.proxy(cfg, name="failover")
    slow = H.Background(proxy, ["http://rr.test:%d/slow?delay=1.5&i=%d" % (origin.port, i) for i in range(6)])
    H.wait_until(lambda: origin.host("rr.test")["in_flight"] == 6, 10)
    first.kill()
    in_flight = slow.wait()
    failed = [r for r in in_flight if r.status != 200]
    H.check(failed and all(r.status == 502 and 'next-hop="p1"' in (r.header("Proxy-Status") or "") for r in failed),
            "requests in flight through the killed parent should fail once with 502 next-hop=p1: %s"
            % H.summarize(in_flight))
    H.check(len(failed) < 6, "requests through p2 should not fail: %s" % H.summarize(in_flight))
    after = [H.request(proxy, "http://rr.test:%d/after?i=%d" % (origin.port, i)) for i in range(8)]
    H.check(all(r.status == 200 and parent_of(r) == str(second.port) for r in after),
            "after the kill every request should go through p2 at once: %s"
            % [(r.status, parent_of(r) if r.status == 200 else r.header("Proxy-Status")) for r in after])
    m = H.metrics_when(proxy, "politeproxy_parent_up", 0, parent="p1")
    H.check(H.mget(m, "politeproxy_parent_up", parent="p1") == 0, "p1 should be down: parent_up %s"
            % H.mseries(m, "politeproxy_parent_up"))
    H.log("killed p1: %d of 6 in flight failed with 502 next-hop=p1; 8 later ones went through p2" % len(failed))

    first.start()
    time.sleep(2.5)  # retry_after 1 s, doubled at most once, jittered
    back = [H.request(proxy, "http://rr.test:%d/back?i=%d" % (origin.port, i)) for i in range(6)]
    H.check(all(r.status == 200 for r in back), "after the restart: %s" % H.summarize(back))
    H.check(str(first.port) in {parent_of(r) for r in back}, "the restarted p1 carried none of 6 requests")
    m = H.metrics_when(proxy, "politeproxy_parent_up", 1, parent="p1")
    H.check(H.mget(m, "politeproxy_parent_up", parent="p1") == 1, "p1 should be up again")
    H.log("restarted p1 carries requests again; parent_requests_total: %s" % H.mseries(m, "politeproxy_parent_requests_total"))


if __name__ == "__main__":
    H.main(test, timeout=90)
