"""The Scrapy spider adaptive_bench.py runs, one process per run:

    /usr/bin/python3 -m scrapy runspider adaptive_spider.py -a origin=http://127.0.0.1:PORT \\
        [-a proxy=http://127.0.0.1:PROXYPORT] [-a stats_file=FILE] [-s SETTING=VALUE ...]

It asks for http://ORIGIN/item/N, N = 0, 1, 2, ... up to 10**7 (a lazy generator: Scrapy
takes the next one only when a slot is free, and every URL is unique), each through
`proxy` when given (request.meta["proxy"]). Every response is just counted (503s too:
HTTPERROR_ALLOW_ALL); nothing is retried.

When the spider opens, before its first request, it calls the origin's /__start
directly (never through the proxy), which starts the origin's schedule, and prints
"adaptive_spider: started T0" (T0 = the origin's clock, CLOCK_MONOTONIC). So the
schedule's clock and the crawl start together, whatever Scrapy's start-up time.
CLOSESPIDER_TIMEOUT, set by the runner, also counts from the opening.

On close it writes its counts to stats_file (JSON): responses by status, how many of
them came from the origin (X-Bench-Origin) and how many passed through politeproxy
(Proxy-Status), download errors by type, and Scrapy's own stats.
The contender's settings come with -s, which outranks custom_settings below.
"""

import collections
import json
import urllib.request

import scrapy
from scrapy import signals

ITEMS = 10 ** 7


class AdaptiveSpider(scrapy.Spider):
    name = "adaptive_bench"
    custom_settings = {
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        "DOWNLOAD_TIMEOUT": 30,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "REDIRECT_ENABLED": False,
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",  # silences 2.8's deprecation warning
    }

    def __init__(self, origin, proxy="", stats_file="", **kwargs):
        super().__init__(**kwargs)
        self.origin = origin.rstrip("/")
        self.proxy = proxy
        self.stats_file = stats_file
        self.statuses = collections.Counter()
        self.from_origin = 0
        self.via_proxy = 0
        self.errors = collections.Counter()

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_opened, signal=signals.spider_opened)
        crawler.signals.connect(spider.on_closed, signal=signals.spider_closed)
        return spider

    def on_opened(self, spider):
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(self.origin + "/__start", timeout=10) as r:
            t0 = json.loads(r.read())["start"]
        print("adaptive_spider: started %.6f" % t0, flush=True)

    def start_requests(self):
        meta = {"proxy": self.proxy} if self.proxy else {}
        for n in range(ITEMS):
            yield scrapy.Request("%s/item/%d" % (self.origin, n), callback=self.parse, errback=self.failed,
                                 meta=dict(meta))

    def parse(self, response):
        self.statuses[response.status] += 1
        if b"X-Bench-Origin" in response.headers:
            self.from_origin += 1
        if b"Proxy-Status" in response.headers:
            self.via_proxy += 1

    def failed(self, failure):
        self.errors[failure.type.__name__] += 1

    def on_closed(self, spider, reason):
        if not self.stats_file:
            return
        with open(self.stats_file, "w") as f:
            json.dump({"reason": reason, "statuses": {str(k): v for k, v in self.statuses.items()},
                       "from_origin": self.from_origin, "via_proxy": self.via_proxy, "errors": dict(self.errors),
                       "scrapy": self.crawler.stats.get_stats()}, f, indent=1, default=str)
