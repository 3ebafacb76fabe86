#!/usr/bin/python3
"""Real crawlers through TLS interception, each trusting the proxy's CA as README shows
(Scrapy verifies nothing by default): httpx, aiohttp and Scrapy each send 12 slow
requests at once to one TLS origin through the proxy (concurrency 2). Every response is
the origin's, with Proxy-Status queue-wait; the origin, counting what it sees per host,
never has more than 2 of a client's requests at once, and has 2 at some point. The same
Scrapy crawl in tunnel mode also works: there a tunnel is one request, the documented
weaker bound: a tunnel holds a slot while open, so a keep-alive client needs as many
slots as tunnels, and the requests inside are not counted."""
import asyncio
import json
import os
import ssl
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

REQUESTS = 12


def with_httpx(proxy_url, urls, ca):
    import httpx

    async def run():
        async with httpx.AsyncClient(proxies=proxy_url, verify=ca, trust_env=False, timeout=30) as c:
            rs = await asyncio.gather(*(c.get(u) for u in urls))
            return [(r.status_code, r.headers.get("proxy-status", "")) for r in rs]
    return asyncio.run(run())


def with_aiohttp(proxy_url, urls, ca):
    import aiohttp

    async def run():
        ctx = ssl.create_default_context(cafile=ca)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
            async def one(u):
                async with s.get(u, proxy=proxy_url, ssl=ctx) as r:
                    await r.read()
                    return r.status, r.headers.get("Proxy-Status", "")
            return await asyncio.gather(*(one(u) for u in urls))
    return asyncio.run(run())


SCRAPY = textwrap.dedent("""
    import json, sys, scrapy
    from scrapy.crawler import CrawlerProcess
    proxy, out, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
    got = []
    class S(scrapy.Spider):
        name = "s"
        def start_requests(self):
            for u in urls:
                yield scrapy.Request(u, meta={"proxy": proxy}, dont_filter=True)
        def parse(self, response):
            got.append((response.status, response.headers.get("Proxy-Status", b"").decode()))
    p = CrawlerProcess({"LOG_LEVEL": "ERROR", "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
                        "AUTOTHROTTLE_ENABLED": False, "ROBOTSTXT_OBEY": False, "RETRY_ENABLED": False,
                        "DOWNLOAD_TIMEOUT": 30, "TELNETCONSOLE_ENABLED": False})
    p.crawl(S)
    p.start()
    json.dump(got, open(out, "w"))
""")


def with_scrapy(t, proxy_url, urls):
    out = os.path.join(t.workdir, "scrapy.json")
    env = dict(os.environ)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, "-c", SCRAPY, proxy_url, out] + urls, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, env=env)
    H.check(r.returncode == 0 and os.path.exists(out), "scrapy failed (%d): %s" % (r.returncode, r.stdout[-800:]))
    return [tuple(x) for x in json.load(open(out))]


def test(t):
    ca_cert, ca_key = t.gen_ca()
    t._cert = H.make_cert(t.workdir, "httpx.test", extra_names=("aiohttp.test", "scrapy.test", "tunnel.test"))
    origin = t.origin(tls=True)
    origin_cert, _ = t.cert()
    cfg = H.base_config(tls_port=origin.port, concurrency=2, rate=1000, burst=1000)
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    proxy = t.proxy(cfg)
    proxy_url = "http://127.0.0.1:%d" % proxy.port

    def urls(host):
        return ["https://%s:%d/slow?delay=0.2&i=%d" % (host, origin.port, i) for i in range(REQUESTS)]

    runs = [("httpx.test", lambda u: with_httpx(proxy_url, u, ca_cert)),
            ("aiohttp.test", lambda u: with_aiohttp(proxy_url, u, ca_cert)),
            ("scrapy.test", lambda u: with_scrapy(t, proxy_url, u))]
    for host, run in runs:
        got = run(urls(host))
        H.check(len(got) == REQUESTS and all(s == 200 for s, _ in got), "%s: statuses %r" % (host, got))
        H.check(all("queue-wait=" in p for _, p in got), "%s: a response without Proxy-Status queue-wait: %r"
                % (host, got))
        stats = origin.host(host)
        H.check(stats["count"] == REQUESTS and stats["peak"] == 2, "%s: the origin saw %d requests, %d at once "
                "(bound 2)" % (host, stats["count"], stats["peak"]))
        H.log("%s: %d requests through interception, origin peak %d (bound 2)" % (host, REQUESTS, stats["peak"]))

    # tunnel mode: works, with the weaker bound. A keep-alive client holds its tunnels
    # open, each one slot, so the concurrency must allow as many tunnels as it opens.
    tunnel_cfg = dict(cfg, tls={"mode": "tunnel"}, defaults=dict(cfg["defaults"], concurrency=REQUESTS))
    tunneling = t.proxy(tunnel_cfg, name="tunneling")
    got = with_scrapy(t, "http://127.0.0.1:%d" % tunneling.port, urls("tunnel.test"))
    H.check(len(got) == REQUESTS and all(s == 200 for s, _ in got), "tunnel mode: statuses %r" % got)
    H.check(not any("queue-wait" in p for _, p in got), "tunnel mode: a response was gated inside the tunnel")
    H.log("tunnel mode: %d requests, origin peak %d (a tunnel is one request: the bound is on tunnels)"
          % (REQUESTS, origin.host("tunnel.test")["peak"]))


if __name__ == "__main__":
    H.main(test, timeout=120)
