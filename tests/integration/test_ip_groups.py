#!/usr/bin/python3
"""Counting by the address connected to. groups.ip: 4 hosts on one shared-hosting address
(127.0.0.1) and 2 on another (127.0.0.2), host concurrency 2, ip group 3: each address's
origin, counting its hosts together, never has more than 3 at once, and has 3; no host
has more than 2. /hosts shows each host's gate under its own name. key: ip: the same hosts
under concurrency 2 share one gate per address, named by the address, whichever way the
address is spelled (a name, 127.0.0.1, 127.1, [::ffff:127.0.0.1])."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SHARED = ["w%d.shared.test" % i for i in range(4)]  # -> 127.0.0.1
ELSEWHERE = ["x0.elsewhere.example", "x1.elsewhere.example"]  # -> 127.0.0.2


def urls(origin, hosts, times, delay, tag):
    return ["http://%s:%d/%s?delay=%s&i=%d" % (h, origin.port, tag, delay, i)
            for i, h in enumerate(hosts * times)]


def requests_at(origin, hosts):
    return [r for h in hosts for r in origin.host(h)["requests"]]


def config(**over):
    cfg = H.base_config(concurrency=2, rate=1000, burst=1000, **over)
    cfg["resolve"].update({"*.elsewhere.example": "127.0.0.2"})
    return cfg


def test(t):
    one = t.origin()
    two = t.origin(address="127.0.0.2")

    # A. groups.ip: one cap per address, across the hosts on it.
    cfg = config()
    cfg["groups"] = {"ip": {"concurrency": 3}}
    proxy = t.proxy(cfg, name="groups")
    results = H.concurrent(proxy, urls(one, SHARED, 3, 0.4, "a") + urls(two, ELSEWHERE, 3, 0.4, "a"), timeout=30)
    H.check(all(r.status == 200 for r in results), "groups.ip: %s" % H.summarize(results))
    H.check_peak_across(one, SHARED, 12, 3, "127.0.0.1's 4 hosts (ip group 3)")
    H.check_peak_across(two, ELSEWHERE, 6, 3, "127.0.0.2's 2 hosts (ip group 3)")
    for o, hosts in ((one, SHARED), (two, ELSEWHERE)):
        for h in hosts:
            H.check(o.host(h)["peak"] <= 2, "%s had %d at once, host bound 2" % (h, o.host(h)["peak"]))
    H.check(set(SHARED + ELSEWHERE) <= set(proxy.hosts()), "/hosts: %s" % sorted(proxy.hosts()))

    # B. key: ip: one gate per address, however the address is spelled.
    one.reset()
    two.reset()
    proxy = t.proxy(config(key="ip", tls_port=one.port), name="key-ip")
    spellings = ["127.0.0.1", "127.1", "[::ffff:127.0.0.1]"]
    batch = urls(one, SHARED + spellings, 2, 0.4, "b") + urls(two, ELSEWHERE, 2, 0.4, "b")
    results = H.concurrent(proxy, batch, timeout=30)
    H.check(all(r.status == 200 for r in results), "key: ip: %s" % H.summarize(results))
    at_one = [r for st in one.stats().values() for r in st["requests"]]
    H.check(len(at_one) == 14, "127.0.0.1's origin saw %d requests, sent 14" % len(at_one))
    H.check(H.overlap_peak(at_one) == 2, "127.0.0.1 had %d at once under key: ip, bound 2" % H.overlap_peak(at_one))
    H.check(H.overlap_peak(requests_at(two, ELSEWHERE)) == 2, "127.0.0.2 had %d at once, bound 2"
            % H.overlap_peak(requests_at(two, ELSEWHERE)))
    hosts = proxy.hosts()
    H.check(sorted(hosts) == ["127.0.0.1", "127.0.0.2"], "/hosts should name the gates by address: %s" % sorted(hosts))
    m = H.metrics_when(proxy, "politeproxy_requests_total", 14, host="127.0.0.1", outcome="ok")
    H.check(H.mget(m, "politeproxy_requests_total", host="127.0.0.1", outcome="ok") == 14,
            "requests_total{host=127.0.0.1,outcome=ok} should count all 14")

    # A tunnel holds its address's slot while open.
    H.check_tunnel_holds_slot(proxy, "w0.shared.test", one.port, "127.0.0.1")


if __name__ == "__main__":
    H.main(test, timeout=90)
