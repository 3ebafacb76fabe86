"""Requests through the proxy with http.client: request() sends one absolute-form
request on a fresh connection and records a Result (status, headers, body, error,
timing); concurrent() sends N at once from threads, Background does that in the
background; https_session() is a requests session that goes through the proxy.
brief() and summarize() shorten what tests print."""
import http.client
import json
import threading
import time

from harness_checks import check


class Result:
    def __init__(self, tag=None):
        self.tag = tag
        self.status = None
        self.reason = None
        self.headers = []
        self.body = b""
        self.error = None
        self.t_start = None
        self.t_end = None

    @property
    def elapsed(self):
        return None if self.t_end is None else self.t_end - self.t_start

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def json(self):
        return json.loads(self.body.decode())

    def __repr__(self):
        return "<Result %s status=%s error=%s elapsed=%s>" % (
            self.tag, self.status, self.error,
            None if self.elapsed is None else "%.3f" % self.elapsed)


def request(proxy, url, method="GET", body=None, headers=None, timeout=20, tag=None,
            encode_chunked=False):
    """One request through the proxy: absolute-form target on a fresh connection."""
    r = Result(tag or url)
    r.t_start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        conn.request(method, url, body=body, headers=hdrs, encode_chunked=encode_chunked)
        resp = conn.getresponse()
        r.status, r.reason = resp.status, resp.reason
        r.headers = resp.getheaders()
        r.body = resp.read()
    except Exception as e:  # noqa: BLE001 - recorded, the test decides
        r.error = "%s: %s" % (type(e).__name__, e)
    finally:
        r.t_end = time.monotonic()
        conn.close()
    return r


def concurrent(proxy, urls, timeout=30, **kw):
    """Send every url at once (one thread and connection each). Results in order."""
    results = [None] * len(urls)
    barrier = threading.Barrier(len(urls) + 1)

    def run(i, u):
        try:
            barrier.wait(10)
        except threading.BrokenBarrierError:
            pass
        results[i] = request(proxy, u, timeout=timeout, tag="#%d %s" % (i, u), **kw)

    threads = [threading.Thread(target=run, args=(i, u), daemon=True)
               for i, u in enumerate(urls)]
    for th in threads:
        th.start()
    barrier.wait(10)
    deadline = time.monotonic() + timeout + 10
    for th in threads:
        th.join(max(0.1, deadline - time.monotonic()))
    for i, res in enumerate(results):
        if res is None:
            res = results[i] = Result("#%d %s" % (i, urls[i]))
            res.error = "client thread still running after %ss" % (timeout + 10)
    return results


class Background:
    """concurrent() in a background thread: start now, .wait() later."""

    def __init__(self, proxy, urls, timeout=30, **kw):
        self.results = None
        self._t = threading.Thread(target=self._run, args=(proxy, urls, timeout, kw),
                                   daemon=True)
        self._t.start()

    def _run(self, proxy, urls, timeout, kw):
        self.results = concurrent(proxy, urls, timeout=timeout, **kw)

    def wait(self, timeout=60):
        self._t.join(timeout)
        check(not self._t.is_alive(), "background requests still running after %ss"
              % timeout)
        return self.results


def brief(host_stats):
    """Origin host stats without the long lists, for messages."""
    return {k: v for k, v in host_stats.items() if k not in ("arrivals", "requests")}


def summarize(results):
    out = {}
    for r in results:
        key = r.status if r.error is None else "error"
        out[key] = out.get(key, 0) + 1
    return out


def https_session(proxy, cafile):
    """A requests session that sends HTTPS through `proxy` and trusts `cafile` alone."""
    import requests
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE in the environment would replace `verify`
    s.proxies = {"https": "http://127.0.0.1:%d" % proxy.port}
    s.verify = cafile
    return s
