#!/usr/bin/python3
"""defaults.key: domain: every host of one registrable domain (Public Suffix List,
libpsl) shares one gate. 12 slow requests spread over 6 subdomains of site.test, at
concurrency 2: the origin, counting all of them together, never has more than 2 at once
(with `key: host` it would have 12), and has 2; another domain keeps its own 2 in the
same run. /hosts and /metrics name the gate by the domain. A CONNECT to a subdomain takes
the domain's slot too."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SUBDOMAINS = ["a%d.site.test" % i for i in range(6)]
OTHER = ["www.other.test", "api.other.test"]


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=2, rate=1000, burst=1000, key="domain", tls_port=origin.port)
    proxy = t.proxy(cfg)
    urls = ["http://%s:%d/d?delay=0.4&i=%d" % (h, origin.port, i) for i, h in enumerate(SUBDOMAINS * 2)]
    urls += ["http://%s:%d/d?delay=0.4&i=%d" % (h, origin.port, i) for i, h in enumerate(OTHER * 2)]
    results = H.concurrent(proxy, urls, timeout=30)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests failed: %s" % (len(bad), bad[:3]))

    H.check_peak_across(origin, SUBDOMAINS, 12, 2, "site.test's 6 subdomains")
    H.check_peak_across(origin, OTHER, 4, 2, "other.test")
    hosts = proxy.hosts()
    H.check("site.test" in hosts and "other.test" in hosts and not any(h in hosts for h in SUBDOMAINS),
            "/hosts should name the gates by domain: %s" % sorted(hosts))
    m = H.metrics_when(proxy, "politeproxy_requests_total", 12, host="site.test", outcome="ok")
    H.check(H.mget(m, "politeproxy_requests_total", host="site.test", outcome="ok") == 12,
            "requests_total{host=site.test,outcome=ok} should count all 12")

    # A tunnel to a subdomain holds the domain's slot while open.
    H.check_tunnel_holds_slot(proxy, "a0.site.test", origin.port, "site.test")


if __name__ == "__main__":
    H.main(test, timeout=60)
