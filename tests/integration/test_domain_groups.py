#!/usr/bin/python3
"""groups.domain: a cap across every host of one registrable domain, on top of each
host's own bound. 18 slow requests over 6 subdomains of site.test (host concurrency 2,
domain group 3): the origin, counting the subdomains together, never has more than 3 at
once, and has 3; no subdomain has more than 2; other.test keeps its own 3 in the same
run. /hosts shows the group while it is busy. Clients that leave while parked at the
group, and a reload that raises the cap, leave the group whole: afterwards it is idle,
the new cap is in force, and a request goes through at once."""
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SUBDOMAINS = ["a%d.site.test" % i for i in range(6)]
OTHER = ["www.other.test", "api.other.test"]


def urls(origin, hosts, times, delay, tag):
    return ["http://%s:%d/%s?delay=%s&i=%d" % (h, origin.port, tag, delay, i)
            for i, h in enumerate(hosts * times)]


def group_of(proxy, host):
    return (proxy.hosts().get(host) or {}).get("domain_group")


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=2, rate=1000, burst=1000)
    cfg["groups"] = {"domain": {"concurrency": 3}}
    proxy = t.proxy(cfg)

    # A. The domain's bound holds across its hosts, each host keeps its own.
    load = H.Background(proxy, urls(origin, SUBDOMAINS, 3, 0.4, "a") + urls(origin, OTHER, 3, 0.4, "a"))
    seen = []
    deadline = time.monotonic() + 20
    while load.results is None and time.monotonic() < deadline:
        g = group_of(proxy, "a0.site.test")
        if g:
            seen.append(g)
        time.sleep(0.05)
    results = load.wait()
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests failed: %s" % (len(bad), bad[:3]))
    H.check_peak_across(origin, SUBDOMAINS, 18, 3, "site.test's 6 subdomains (group bound 3)")
    H.check_peak_across(origin, OTHER, 6, 3, "other.test's 2 hosts (group bound 3)")
    for h in SUBDOMAINS + OTHER:
        H.check(origin.host(h)["peak"] <= 2, "%s had %d at once, host bound 2" % (h, origin.host(h)["peak"]))
    H.check(seen and all(g["key"] == "site.test" and g["limit"] == 3 and g["in_flight"] <= 3 for g in seen),
            "/hosts' domain_group while busy: %s" % seen[:5])
    H.check(any(g["waiting"] > 0 for g in seen), "/hosts never showed anyone waiting at the group: %s" % seen[:5])

    # B. Clients that give up while parked at the group (holding their host's slot).
    origin.reset()
    hold = H.Background(proxy, urls(origin, SUBDOMAINS[:3], 1, 1.5, "hold"))
    H.check(H.wait_until(lambda: (group_of(proxy, "a0.site.test") or {}).get("in_flight") == 3, 5.0),
            "the group never filled: %s" % group_of(proxy, "a0.site.test"))
    leavers = []
    for i, h in enumerate(SUBDOMAINS[3:] * 2):
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        s.sendall(("GET http://%s:%d/leave?i=%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (h, origin.port, i, h)).encode())
        leavers.append(s)
    H.check(H.wait_until(lambda: (group_of(proxy, "a0.site.test") or {}).get("waiting") == 6, 5.0),
            "6 requests (two per other subdomain, each holding its host slot) should wait at the group: %s" % group_of(proxy, "a0.site.test"))
    for s in leavers:
        s.close()
    H.check(H.wait_until(lambda: (group_of(proxy, "a0.site.test") or {}).get("waiting") == 0, 5.0),
            "clients that left still wait at the group: %s" % group_of(proxy, "a0.site.test"))

    # C. A reload raises the cap while the group is full.
    cfg["groups"]["domain"]["concurrency"] = 5
    with open(proxy.config_path, "w") as f:
        f.write(H.dump_config(cfg))
    os.kill(proxy.pid, signal.SIGHUP)
    H.check(H.wait_until(lambda: (group_of(proxy, "a0.site.test") or {}).get("limit") == 5, 5.0),
            "the reload did not raise the group's cap: %s" % group_of(proxy, "a0.site.test"))
    hold.wait()
    hosts = proxy.hosts_settled(5.0)
    H.check(all(h["in_flight"] == 0 and h["waiting"] == 0 for h in hosts.values()),
            "hosts still busy after everyone left: %s" % hosts)
    g = group_of(proxy, "a0.site.test")
    H.check(g and g["in_flight"] == 0 and g["waiting"] == 0, "the group kept slots after clients left: %s" % g)
    left = sum(origin.host(h)["count"] for h in SUBDOMAINS[3:])
    H.check(left == 0, "%d requests of clients that left reached the origin" % left)
    origin.reset()
    results = H.concurrent(proxy, urls(origin, SUBDOMAINS, 1, 0.4, "after"), timeout=20)
    H.check(all(r.status == 200 for r in results), "after: %s" % H.summarize(results))
    H.check_peak_across(origin, SUBDOMAINS, 6, 5, "after the reload, site.test (cap 5)")


if __name__ == "__main__":
    H.main(test, timeout=90)
