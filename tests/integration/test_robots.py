#!/usr/bin/python3
"""robots.crawl_delay: honor. The proxy reads each origin's /robots.txt once, through the
host's own gate, before the host's first request goes out, and lowers the host's rate to
1/Crawl-delay for the client's User-agent group (or *), never raising it.

A: polite.test asks `Crawl-delay: 0.5` of everyone (robots.txt answered after 0.3 s): of 6
   parallel requests, none reaches the origin before robots.txt was answered, and they
   arrive at least ~0.5 s apart (configured: 50/s); /hosts and host_rate_source say
   "robots"; a second batch fetches no robots.txt again.
B: named.test has a group for MyBot (0.2 s) and one for * (0.5 s): MyBot's requests get 5/s.
C: strict.test is configured at 0.5/s and asks 0.2 s: its rate stays 0.5 (never raised).
D: capped.test asks an hour: max_delay (2 s) caps it, 0.5/s.
E: broken.test answers 500: robots.txt unreachable, a complete disallow for now (RFC 9309
   2.3.1.4): its requests get 503 with Retry-After and never reach the origin.
   missing.test answers 404 (no restrictions) and huge.test's Crawl-delay lies past its
   first 500 KiB (the part read): both keep the configured rate. Neither is fetched
   again within the run.
F: with crawl_delay off (the default) no robots.txt is ever asked for.
G: inside intercepted TLS the proxy reads https://tls.test/robots.txt over TLS itself, and
   the requests after it keep the Crawl-delay (0.25 s: 4/s).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def robots_requests(origin, host):
    return [r for r in origin.host(host)["requests"] if r["target"] == "/robots.txt"]


def others(origin, host):
    return [r for r in origin.host(host)["requests"] if r["target"] != "/robots.txt"]


def get(proxy, origin, host, n, tag, ua="TestCrawler/1.0"):
    urls = ["http://%s:%d/%s?i=%d" % (host, origin.port, tag, i) for i in range(n)]
    results = H.concurrent(proxy, urls, timeout=30, headers={"User-Agent": ua})
    H.check(all(r.status == 200 for r in results), "%s: %s" % (host, H.summarize(results)))


def test(t):
    origin = t.origin()
    origin.set_robots("polite.test", "User-agent: *\nDisallow: /private\nCrawl-delay: 0.5\n", delay=0.3)
    origin.set_robots("named.test", "User-agent: *\nCrawl-delay: 0.5\n\nUser-agent: mybot\nCrawl-delay: 0.2\n")
    origin.set_robots("strict.test", "User-agent: *\nCrawl-delay: 0.2\n")
    origin.set_robots("capped.test", "User-agent: *\nCrawl-delay: 3600\n")
    origin.set_robots("broken.test", "User-agent: *\nCrawl-delay: 5\n", status=500)
    origin.set_robots("missing.test", "User-agent: *\nCrawl-delay: 5\n", status=404)
    origin.set_robots("huge.test", "User-agent: *\n" + "#" * (600 * 1024) + "\nCrawl-delay: 5\n")
    cfg = H.base_config(concurrency=4, rate=50, burst=1,
                        hosts={"strict.test": {"rate": 0.5}})
    cfg["robots"] = {"crawl_delay": "honor", "max_delay": "2s", "cache_ttl": "1h"}
    proxy = t.proxy(cfg)

    # A
    get(proxy, origin, "polite.test", 6, "a")
    fetched = robots_requests(origin, "polite.test")
    H.check(len(fetched) == 1, "polite.test: robots.txt asked %d times" % len(fetched))
    rest = sorted(others(origin, "polite.test"), key=lambda r: r["start"])
    H.check(all(r["start"] >= fetched[0]["end"] for r in rest),
            "a request reached polite.test before its robots.txt was read: robots %s, first %s"
            % (fetched[0], rest[0]))
    gaps = [b["start"] - a["start"] for a, b in zip(rest, rest[1:])]
    H.check(min(gaps) >= 0.45, "polite.test: departures %s s apart, Crawl-delay 0.5" % ["%.2f" % g for g in gaps])
    h = proxy.hosts()["polite.test"]
    H.check(h["rate"] == 2 and h["rate_source"] == "robots", "/hosts polite.test: %s" % h)
    m = proxy.metrics()
    H.check(H.mget(m, "politeproxy_host_rate_source", host="polite.test", source="robots") == 1,
            "host_rate_source{host=polite.test,source=robots} missing")
    H.check(H.mget(m, "politeproxy_host_rate_limit", host="polite.test") == 2, "host_rate_limit of polite.test")
    get(proxy, origin, "polite.test", 2, "a2")
    H.check(len(robots_requests(origin, "polite.test")) == 1, "robots.txt asked again within cache_ttl")

    # B, C, D
    get(proxy, origin, "named.test", 2, "b", ua="Mozilla/5.0 (compatible; MyBot/1.0)")
    get(proxy, origin, "strict.test", 1, "c")
    get(proxy, origin, "capped.test", 1, "d")
    hosts = proxy.hosts()
    for host, rate, source in (("named.test", 5, "robots"), ("strict.test", 0.5, "config"),
                               ("capped.test", 0.5, "robots")):
        H.check(hosts[host]["rate"] == rate and hosts[host]["rate_source"] == source,
                "%s: expected rate %s from %s: %s" % (host, rate, source, hosts[host]))

    # E
    urls = ["http://broken.test:%d/e?i=%d" % (origin.port, i) for i in range(3)]
    results = H.concurrent(proxy, urls, timeout=30)
    H.check(all(r.status == 503 and r.header("Retry-After") and "robots.txt" in (r.header("Proxy-Status") or "")
                for r in results), "broken.test (robots.txt 500): %s" % [(r.status, r.headers) for r in results])
    H.check(not others(origin, "broken.test") and len(robots_requests(origin, "broken.test")) == 1,
            "broken.test: the origin saw %s" % origin.host("broken.test")["requests"])
    for host in ("missing.test", "huge.test"):
        get(proxy, origin, host, 3, "e")
        get(proxy, origin, host, 1, "e2")
        H.check(len(robots_requests(origin, host)) == 1, "%s: robots.txt asked %d times"
                % (host, len(robots_requests(origin, host))))
        h = proxy.hosts()[host]
        H.check(h["rate"] == 50 and h["rate_source"] == "config", "%s: %s" % (host, h))

    # F
    plain = t.proxy(H.base_config(concurrency=4, rate=50, burst=1), name="robots-off")
    origin.reset()
    get(plain, origin, "polite.test", 2, "f")
    H.check(not robots_requests(origin, "polite.test"), "robots.txt asked with crawl_delay off")

    # G
    ca_cert, ca_key = t.gen_ca()
    tls_origin = t.origin(tls=True)  # its certificate names tls.test
    origin_cert, _ = t.cert()
    tls_origin.set_robots("tls.test", "User-agent: *\nCrawl-delay: 0.25\n")
    cfg = H.base_config(tls_port=tls_origin.port, concurrency=4, rate=50, burst=1)
    cfg["robots"] = {"crawl_delay": "honor"}
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    intercepting = t.proxy(cfg, name="intercept")
    session = H.https_session(intercepting, ca_cert)
    for i in range(3):
        r = session.get("https://tls.test:%d/g?i=%d" % (tls_origin.port, i), timeout=20)
        H.check(r.status_code == 200, "https://tls.test/g: %d" % r.status_code)
    fetched = robots_requests(tls_origin, "tls.test")
    H.check(len(fetched) == 1 and fetched[0]["start"] < min(r["start"] for r in others(tls_origin, "tls.test")),
            "tls.test's robots.txt should be read once, first: %s" % tls_origin.host("tls.test")["requests"])
    h = intercepting.hosts()["tls.test"]
    H.check(h["rate"] == 4 and h["rate_source"] == "robots", "/hosts tls.test: %s" % h)


if __name__ == "__main__":
    H.main(test, timeout=90)
