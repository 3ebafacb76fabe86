"""What the fleet tests share: a proxy config that joins a test's redis-server, and the
origin's arrival times for requests whose target carries a tag."""
import harness as H


def fleet_config(store, concurrency=2, hosts=None, rate=100, defaults=None, **fleet):
    cfg = H.base_config(hosts=hosts, concurrency=concurrency, rate=rate, burst=rate,
                        adaptive={"enabled": False}, **(defaults or {}))
    cfg["fleet"] = dict({"redis": store.url, "lease_ttl": "1500ms", "expected_workers": 2,
                         "timeout": "300ms"}, **fleet)
    return cfg


def records(origin, host, tag):
    """The origin's records (start, end: time.monotonic()) of requests whose target has `tag`."""
    return [r for r in origin.host(host)["requests"] if tag in r["target"]]
