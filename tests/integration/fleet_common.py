"""What the fleet tests share: the store a test runs against (make_store: one
redis-server, a Redis Cluster or a Sentinel-watched master, from --store), a proxy config
that joins it, the origin's records of requests whose target carries a tag, steady load
from threads (Streams) and the checks made on it (check_answered, tagged_peak, store_up)."""
import threading
import time

import harness as H


def make_store(t, kind=None):
    """A started fleet store of `kind` (default: the test's --store), stopped at cleanup.
    Every kind has url, client() (keys(), info() over the whole store), start(), kill(),
    pause(), resume() and stop(); kill/pause/resume act on every data node."""
    kind = kind or t.store_kind
    if kind == "single":
        return t.redis()
    if kind == "cluster":
        return t.redis_cluster()
    if kind == "sentinel":
        return t.redis_sentinel()
    raise ValueError("no fleet store of kind %r" % kind)


def fleet_config(store, concurrency=2, hosts=None, rate=100, defaults=None, **fleet):
    cfg = H.base_config(hosts=hosts, concurrency=concurrency, rate=rate, burst=rate,
                        adaptive={"enabled": False}, **(defaults or {}))
    cfg["fleet"] = dict({"redis": store.url, "lease_ttl": "1500ms", "expected_workers": 2,
                         "timeout": "300ms"}, **fleet)
    return cfg


def records(origin, host, tag):
    """The origin's records (start, end: time.monotonic()) of requests whose target has `tag`."""
    return [r for r in origin.host(host)["requests"] if tag in r["target"]]


class Streams:
    """Steady load, bounded in time: `per` threads for each (proxy, host) pair, each
    sending one request after another (`delay` seconds at the origin, `tag` in the
    target) until stop() or `duration` seconds. stop() returns [(proxy name, host,
    Result)]."""

    def __init__(self, origin, pairs, per=1, delay=0.2, tag="stream", duration=30.0, timeout=20):
        self._end = time.monotonic() + duration
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.results = []
        self._threads = [threading.Thread(target=self._run, args=(origin, p, h, k, delay, tag, timeout), daemon=True)
                         for p, h in pairs for k in range(per)]
        for th in self._threads:
            th.start()

    def _run(self, origin, proxy, host, k, delay, tag, timeout):
        i = 0
        while not self._stopping.is_set() and time.monotonic() < self._end:
            url = "http://%s:%d/x?delay=%s&tag=%s&p=%s&k=%d&i=%d" % (host, origin.port, delay, tag, proxy.name, k, i)
            r = H.request(proxy, url, timeout=timeout)
            with self._lock:
                self.results.append((proxy.name, host, r))
            i += 1

    def stop(self, timeout=30):
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for th in self._threads:
            th.join(max(0.1, deadline - time.monotonic()))
        H.check(not any(th.is_alive() for th in self._threads),
                "load threads still waiting for answers %.0f s after the load stopped" % timeout)
        with self._lock:
            return list(self.results)


def check_answered(results, what):
    """Every request got an answer: 200, or the SPEC's 503 with Retry-After. Returns
    {status: count}."""
    counts, bad = {}, []
    for name, host, r in results:
        key = "error" if r.error else r.status
        counts[key] = counts.get(key, 0) + 1
        if not (r.status == 200 or (r.status == 503 and r.header("Retry-After"))):
            bad.append((name, host, r))
    H.log("%s: %d requests: %s" % (what, len(results), counts))
    H.check(results, "%s: no request was sent" % what)
    H.check(not bad, "%s: %d requests not answered 200 or 503 with Retry-After: %s" % (what, len(bad), bad[:3]))
    return counts


def tagged_peak(origin, host, tag):
    """How many requests for `host` whose target carries tag=`tag` were at the origin at once."""
    return H.overlap_peak(records(origin, host, "tag=%s&" % tag))


def store_up(proxy):
    """The proxy's fleet_store_up gauge (None when it has none)."""
    return H.mget(H.parse_metrics(proxy.metrics_text()), "politeproxy_fleet_store_up")
