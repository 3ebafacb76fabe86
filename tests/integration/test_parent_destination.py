#!/usr/bin/python3
"""Through parent proxies every politeness key stays the destination's (two real Squids):
- a 429 from the origin through a parent pauses the destination host (Retry-After): the
  requests behind it wait for the host, and none is sent through the other parent;
- robots.txt (crawl_delay: honor) is fetched through the request's parent, and its
  Crawl-delay sets the destination's rate;
- an HTTP/2 origin behind a parent's tunnel (intercepted HTTPS, ALPN h2 inside the
  tunnel): one session carries the host's streams, gated to its concurrency;
- a fleet of two processes, each through its own parent: the origin's peak for the host
  is the fleet's bound, not one per parent;
- a reload that moves a route to another parent: requests in flight finish through the
  old one, new ones go through the new one."""
import asyncio
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import parent_proxies  # noqa: E402
from h2_origin import H2Origin  # noqa: E402

NAMES = {h: "127.0.0.1" for h in ("busy.test", "robots.test", "alpn.test", "fleet.test", "moved.test")}


def parent_of(result):
    via = ", ".join(v for k, v in json.loads(result.body)["headers"] if k.lower() == "via")
    return via.split("squid-")[1].split(" ")[0] if "squid-" in via else None


def two_parents(a, b, pick="round_robin"):
    cfg = H.base_config(concurrency=2, rate=1000, burst=1000)
    cfg["parents"] = {"a": {"url": a.url}, "b": {"url": b.url}}
    cfg["routes"] = [{"match": ["*.test"], "via": ["a", "b"], "pick": pick}]
    return cfg


def check_throttle(t, origin, a, b):
    proxy = t.proxy(two_parents(a, b), name="throttle")
    first = H.request(proxy, "http://busy.test:%d/x?status=429&retry_after=2" % origin.port)
    H.check(first.status == 429, "the origin's 429 passes through: %s" % first.status)
    t0 = time.monotonic()
    behind = H.concurrent(proxy, ["http://busy.test:%d/y?i=%d" % (origin.port, i) for i in range(4)])
    waited = time.monotonic() - t0
    H.check(all(r.status == 200 for r in behind), "behind the 429: %s" % H.summarize(behind))
    H.check(waited >= 1.5, "the requests behind a 429 (Retry-After 2) through a parent waited only %.2f s" % waited)
    H.check(origin.host("busy.test")["count"] == 5, "the origin saw %d requests, sent 5 (no retry through the "
            "other parent)" % origin.host("busy.test")["count"])
    H.log("429 through a parent: the 4 behind it waited %.2f s for the destination" % waited)
    proxy.stop()


def check_robots(t, origin, a, b):
    cfg = two_parents(a, b)
    cfg["robots"] = {"crawl_delay": "honor"}
    origin.set_robots("robots.test", "User-agent: *\nCrawl-delay: 0.5\n")
    proxy = t.proxy(cfg, name="robots")
    r = H.request(proxy, "http://robots.test:%d/page" % origin.port)
    H.check(r.status == 200, "robots.test: %s" % r.status)
    H.check(proxy.hosts()["robots.test"]["rate"] == 2.0, "robots.test's rate should be 1/0.5 s: %s"
            % proxy.hosts()["robots.test"])
    fetched = [line for p in (a, b) for line in p.requests() if line[6].endswith("/robots.txt")]
    H.check(len(fetched) == 1, "robots.txt should be fetched once through a parent: %s" % fetched)
    H.log("robots.txt through a parent: %s, rate %s" % (fetched[0][6], proxy.hosts()["robots.test"]["rate"]))
    proxy.stop()


def check_h2(t, a, b):
    import httpx
    ca_cert, ca_key = t.gen_ca()
    cert, key = H.make_cert(t.workdir, "alpn.test")
    origin = H2Origin(tls=(cert, key))
    t.stores.append(type("closer", (), {"stop": lambda self: origin.close()})())
    cfg = two_parents(a, b)
    cfg["security"]["connect_ports"].append(origin.port)
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": cert}
    proxy = t.proxy(cfg, name="h2")

    async def sixteen():
        async with httpx.AsyncClient(http2=True, proxies="http://127.0.0.1:%d" % proxy.port, verify=ca_cert,
                                     trust_env=False, timeout=30) as client:
            rs = await asyncio.gather(*(client.get("https://alpn.test:%d/delay/150" % origin.port) for _ in range(16)))
            return [x.status_code for x in rs]
    got = asyncio.run(sixteen())
    H.check(got == [200] * 16, "HTTP/2 through a parent's tunnel: %r" % got)
    st = origin.stats("alpn.test")
    H.check(st["peak"] == 2 and st["count"] == 16, "the h2 origin behind a parent: %d requests, peak %d"
            % (st["count"], st["peak"]))
    H.check(1 <= st["connections"] <= cfg["workers"] * 2, "%d h2 connections (one session per worker and parent)"
            % st["connections"])
    H.log("HTTP/2 origin behind a parent's tunnel: 16 streams, peak %d, %d connections" % (st["peak"], st["connections"]))
    proxy.stop()


def check_fleet(t, origin, a, b):
    store = t.redis()
    proxies = []
    for name, parent in (("fleet-a", a), ("fleet-b", b)):
        cfg = H.base_config(concurrency=2, rate=1000, burst=1000, adaptive={"enabled": False})
        cfg["fleet"] = {"redis": store.url, "lease_ttl": "3s", "expected_workers": 2, "timeout": "500ms"}
        cfg["parents"] = {"only": {"url": parent.url}}
        cfg["routes"] = [{"match": ["*.test"], "via": ["only"]}]
        proxies.append(t.proxy(cfg, name=name))
    runs = [H.Background(p, ["http://fleet.test:%d/f?delay=0.3&p=%d&i=%d" % (origin.port, n, i) for i in range(8)])
            for n, p in enumerate(proxies)]
    results = [r for run in runs for r in run.wait()]
    H.check(all(r.status == 200 for r in results), "fleet through parents: %s" % H.summarize(results))
    H.check({parent_of(r) for r in results} == {str(a.port), str(b.port)}, "each process should use its own parent")
    st = origin.host("fleet.test")
    H.check(st["peak"] == 2, "the fleet's bound is 2 across two processes and two parents; the origin saw %d" % st["peak"])
    H.log("fleet: two processes through two parents, origin peak %d of 16" % st["peak"])
    for p in proxies:
        p.stop()


def check_reload(t, origin, a, b):
    cfg = H.base_config(concurrency=4, rate=1000, burst=1000)
    cfg["parents"] = {"a": {"url": a.url}, "b": {"url": b.url}}
    cfg["routes"] = [{"match": ["*.test"], "via": ["a"]}]
    proxy = t.proxy(cfg, name="reload")
    slow = H.Background(proxy, ["http://moved.test:%d/slow?delay=1&i=%d" % (origin.port, i) for i in range(3)])
    H.wait_until(lambda: origin.host("moved.test")["in_flight"] == 3, 10)
    cfg["routes"] = [{"match": ["*.test"], "via": ["b"]}]
    with open(proxy.config_path, "w") as f:
        f.write(H.dump_config(cfg))
    os.kill(proxy.pid, signal.SIGHUP)
    H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_config_reloads_total", 0, result="success") == 1, 5)
    after = H.request(proxy, "http://moved.test:%d/after" % origin.port)
    old = slow.wait()
    H.check(all(r.status == 200 and parent_of(r) == str(a.port) for r in old),
            "requests in flight at the reload should finish through the old parent: %s" % [(r.status, parent_of(r)) for r in old])
    H.check(after.status == 200 and parent_of(after) == str(b.port), "after the reload: %s through %s"
            % (after.status, parent_of(after)))
    H.log("reload: 3 in flight finished through a, the next went through b")


def test(t):
    parent_proxies.require("squid")
    origin = t.origin()
    a, b = t.parent("squid", names=NAMES), t.parent("squid", names=NAMES)
    check_throttle(t, origin, a, b)
    check_robots(t, origin, a, b)
    check_h2(t, a, b)
    check_fleet(t, origin, a, b)
    check_reload(t, origin, a, b)


if __name__ == "__main__":
    H.main(test, timeout=120)
