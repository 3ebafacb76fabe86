#!/usr/bin/python3
"""/metrics after real traffic (forwarded, rejected, a registry override) passes
`promtool check metrics`, carries every family SPEC.md lists for the core, and shows
host_override_info for the active override only."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

REQUIRED = [
    "politeproxy_host_in_flight", "politeproxy_host_waiting", "politeproxy_host_concurrency_limit",
    "politeproxy_host_rate_limit", "politeproxy_requests_total", "politeproxy_rejected_total",
    "politeproxy_queue_wait_seconds", "politeproxy_upstream_response_seconds",
    "politeproxy_hosts_tracked", "politeproxy_client_connections",
    "politeproxy_upstream_connections", "politeproxy_host_override_info",
]


def test(t):
    origin = t.origin()
    hosts = {
        "api.test": {"concurrency": 4, "rate": 200, "burst": 200, "reason": "test \"quoted\" reason"},
        "old.test": {"concurrency": 1, "expires": "2020-01-01"},
    }
    proxy = t.proxy(H.base_config(hosts=hosts, concurrency=1, queue={"max_waiting": 1}))
    results = H.concurrent(proxy, ["http://api.test:%d/m?delay=0.1&i=%d" % (origin.port, i) for i in range(4)]
                           + ["http://full.test:%d/m?delay=0.5&i=%d" % (origin.port, i) for i in range(4)])
    H.check(any(r.status == 503 for r in results), "expected some 503 from the full queue: %s"
            % H.summarize(results))
    H.metrics_when(proxy, "politeproxy_requests_total", 4, host="api.test", outcome="ok")
    text = proxy.metrics_text()
    H.promtool_check(text)

    m = H.parse_metrics(text)
    names = {n for (n, _) in m}
    for n in REQUIRED:
        H.check(any(x == n or x.startswith(n + "_") for x in names), "metric %s missing from /metrics" % n)
    H.check(H.mget(m, "politeproxy_host_concurrency_limit", host="api.test") == 4,
            "api.test's limit should be its override's 4")
    H.check(H.mget(m, "politeproxy_host_override_info", host="api.test", source="registry",
                   reason="test \"quoted\" reason") == 1, "host_override_info for api.test missing")
    H.check(not any(dict(ls).get("host") == "old.test" for (n, ls) in m
                    if n == "politeproxy_host_override_info"),
            "the expired override old.test must not be reported as active")
    H.check((H.mget(m, "politeproxy_rejected_total", reason="queue_full") or 0) >= 1,
            "rejected_total{reason=queue_full} did not count the 503s")
    H.check((H.mget(m, "politeproxy_requests_total", host="api.test", outcome="ok") or 0) == 4,
            "requests_total{host=api.test,outcome=ok} should be 4")


if __name__ == "__main__":
    H.main(test, timeout=45)
