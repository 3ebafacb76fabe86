#!/usr/bin/python3
"""Several crawlers on one host: clients.share: fair hands a host's next free slot to the
client furthest behind its weighted share (issue 28). The client is named by a request
header here (clients.identify_by: header:X-Crawler).

A  Two crawlers, one host at concurrency 2, 200 ms per response (rate out of the way,
   adaptive off): crawler A parks 2000 requests (HTTP/1.1, one connection each), then
   crawler B sends 20 requests at 1 s ticks (each on its own connection, whether or not
   the one before was answered).
   - B's p95 queue wait (the proxy's `Proxy-Status: politeproxy; queue-wait=S`) is at
     most 2 service times (0.4 s, plus 50 ms for this 2-core machine); behind one FIFO
     queue it would be minutes;
   - fairness decides who goes, never how many: the origin never has more than 2 of the
     host's requests at once (and does have 2), and the host's throughput over B's 20 s
     (100 service times) is within 2% of 2 / 0.2 s = 10 responses/s: A takes every slot
     B does not use, and none of A's requests is refused;
   - X-Crawler never reaches the origin (its echo of the request's header fields);
   - then A closes its ~1700 connections: the proxy goes on serving (a last request: 200),
     and host_in_flight and every client_waiting go back to 0.
B  Weights (clients.weights {heavy: 4, light: 1}): both clients keep 20 requests
   outstanding for 20 s against one host at concurrency 2 and 50 ms per response; of
   the requests the origin served (after a 2 s warm-up) heavy's share is 80% within 5
   points ([0.75, 0.85]), and client_requests_total{client,outcome="ok"} counts each
   client's answers.

two_crawlers() is the scenario of A with the sharing mode and the counts as parameters
(tests/bench/fair_share_wait.py runs it with share: fifo and share: fair). AsyncClients
(an asyncio loop in a thread of its own: thousands of client connections at once, each
request a future, closed per group) is used by test_client_caps.py too.
"""
import asyncio
import json
import math
import os
import re
import resource
import sys
import threading
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "fair.test"
WEIGHTS_HOST = "weights.test"
SERVICE = 0.2           # seconds per response at the origin (A)
ALLOWANCE = 0.05        # seconds on top of 2 service times for B's p95 queue wait
THROUGHPUT_TOLERANCE = 0.02
WEIGHTS_SECONDS = 20.0  # ~720 responses: 0.05 off the 0.8 share is over 3 binomial SDs, and the share is not random
WEIGHTS_SERVICE = 0.05
WEIGHTS_OUTSTANDING = 20

QUEUE_WAIT_RE = re.compile(r"queue-wait=([0-9.]+)")


# -- many clients at once -------------------------------------------------------------
class AsyncClients:
    """Client connections to the proxy from an asyncio loop in a thread of its own.

    get() starts one GET on a connection of its own (HTTP/1.1, `Connection: close`) and
    returns a concurrent.futures.Future of its harness Result (with t_sent: when the
    request was written). Requests belong to a group (a crawler): close_group() aborts
    that group's open connections, as a crawler that gives up. keep_busy() keeps N
    requests of a group outstanding until a deadline. At most CONNECTS_AT_ONCE
    connections are being opened at a time (the proxy's listen backlog)."""

    CONNECTS_AT_ONCE = 200

    def __init__(self, proxy_port):
        self.port = proxy_port
        self.loop = asyncio.new_event_loop()
        self.sent = {}      # group -> requests written (updated in the loop's thread)
        self._open = {}     # group -> set of open transports
        self._closed = set()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="async-clients")
        self._thread.start()
        self._sem = self.call(self._make_semaphore(), 5)

    async def _make_semaphore(self):
        return asyncio.Semaphore(self.CONNECTS_AT_ONCE)

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro, timeout):
        return self.submit(coro).result(timeout)

    def get(self, url, group="", headers=None, source=None, timeout=900):
        return self.submit(self.exchange(url, group, headers, source, timeout))

    async def exchange(self, url, group="", headers=None, source=None, timeout=900):
        r = H.Result("%s %s" % (group, url))
        r.t_start = time.monotonic()
        r.t_sent = None
        r.group = group
        writer = None
        try:
            async with self._sem:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=(source, 0) if source else None), 15)
                self._open.setdefault(group, set()).add(writer.transport)
                fields = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
                writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n"
                              % (url, urlsplit(url).netloc, fields)).encode())
                await writer.drain()
            r.t_sent = time.monotonic()
            self.sent[group] = self.sent.get(group, 0) + 1
            await asyncio.wait_for(self._read(reader, r), max(0.1, r.t_start + timeout - time.monotonic()))
        except asyncio.CancelledError:
            r.error = "cancelled"
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError,
                ValueError) as e:
            r.error = "%s%s: %s" % ("closed by the test: " if group in self._closed else "",
                                    type(e).__name__, e)
        finally:
            r.t_end = time.monotonic()
            if writer is not None:
                self._open.get(group, set()).discard(writer.transport)
                writer.close()
        return r

    @staticmethod
    async def _read(reader, r):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ?(.*)", lines[0])
        if not m:
            raise ValueError("not a status line: %r" % lines[0])
        headers = []
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers.append((k.strip(), v.strip()))
        hd = {k.lower(): v for k, v in headers}
        if "chunked" in hd.get("transfer-encoding", "").lower():
            body = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                body += await reader.readexactly(size)
                await reader.readexactly(2)
        elif "content-length" in hd:
            body = await reader.readexactly(int(hd["content-length"]))
        else:
            body = await reader.read()
        r.status, r.reason, r.headers, r.body = int(m.group(1)), m.group(2), headers, body

    def close_group(self, group):
        """Abort every open connection of `group` (its requests end with an error)."""
        async def abort():
            self._closed.add(group)
            transports = list(self._open.get(group, ()))
            for tr in transports:
                tr.abort()
            return len(transports)
        return self.call(abort(), 10)

    def open_count(self, group):
        return len(self._open.get(group, ()))

    def keep_busy(self, url_of, group, n, until, headers=None):
        """N requests of `group` outstanding until `until` (time.monotonic()): each of N
        loops sends url_of(i, k) and sends the next as its answer comes. A future of the
        list of Results."""
        async def run():
            results = []

            async def loop(i):
                k = 0
                while time.monotonic() < until:
                    r = await self.exchange(url_of(i, k), group, headers, timeout=60)
                    results.append(r)
                    k += 1
                    if r.error or r.status != 200:
                        await asyncio.sleep(0.05)
            await asyncio.gather(*(loop(i) for i in range(n)))
            return results
        return self.submit(run())

    def stop(self):
        async def cancel_all():
            for group in list(self._open):
                for tr in list(self._open[group]):
                    tr.abort()
            tasks = [x for x in asyncio.all_tasks() if x is not asyncio.current_task()]
            for x in tasks:
                x.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            self.call(cancel_all(), 10)
        except Exception:  # noqa: BLE001 - best effort at cleanup
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()


# -- small helpers --------------------------------------------------------------------
def raise_nofile(need):
    """Raise this process's RLIMIT_NOFILE (inherited by the proxy and the origin) to its
    hard limit; fail when that is under `need`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, need, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    H.check(want >= need, "RLIMIT_NOFILE: hard limit %s, this test needs %d descriptors" % (hard, need))


def queue_wait(r):
    """The queue-wait= of a response's Proxy-Status, in seconds (None: none)."""
    m = QUEUE_WAIT_RE.search(r.header("Proxy-Status") or "")
    return float(m.group(1)) if m else None


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]


def echoed_fields(r):
    """The request header field names the origin echoed (lower-cased), or None when the
    body is not the origin's JSON echo."""
    try:
        return [k.lower() for k, _ in json.loads(r.body.decode())["headers"]]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def leaked(results, field="x-crawler"):
    """Results whose request reached the origin with `field`."""
    return [r for r in results if r.status == 200 and field in (echoed_fields(r) or ())]


def client_labels(m):
    """Every client label value of every politeproxy_client_* series."""
    return {dict(ls).get("client") for (n, ls) in m if n.startswith("politeproxy_client_")} - {None}


# -- scenario A -------------------------------------------------------------------------
def two_crawlers_config(share, parked, concurrency):
    cfg = H.base_config(concurrency=concurrency, rate=1000, burst=concurrency,
                        queue={"max_waiting": max(5000, 2 * parked), "max_wait": "10m"},
                        adaptive={"enabled": False},
                        # a parked request's client connection must outlive the longest wait
                        timeouts={"connect": "5s", "response_headers": "60s", "idle": "15m"})
    cfg["clients"] = {"identify_by": "header:X-Crawler", "share": share}
    cfg["limits"] = {"max_parked": max(50000, 2 * parked),
                     "max_client_connections": max(10000, 2 * parked + 1000)}
    return cfg


def two_crawlers(t, share="fair", parked=2000, b_requests=20, b_interval=1.0, service=SERVICE,
                 concurrency=2, host=HOST):
    """Crawler A parks `parked` requests for `host` (one connection each), then crawler B
    sends `b_requests` at `b_interval` ticks; every request takes `service` seconds at the
    origin; the host runs at `concurrency` with clients.share `share`. Once B has every
    answer, A closes its connections and one last request goes. Returns the figures (the
    proxy and the origin are stopped on return):
      b: B's Results; b_waits: their queue-wait= (s); b_p50/b_p95/b_max;
      a_done: A's Results answered before the close; a_statuses: their statuses counted;
      window: (start, seconds) of B's window, whole service times from B's first send;
      served_in_window / throughput / ideal_throughput (responses per second);
      a_in_window / b_in_window: the origin's completions in the window per crawler;
      peak: the origin's peak in-flight for `host`; a_closed: connections A closed;
      last: the Result of the last request; after: (host_in_flight, sum of client_waiting,
      client_waiting series) once settled; leaks: answers whose request carried X-Crawler
      to the origin."""
    raise_nofile(parked + 2000)
    origin = t.origin()
    proxy = t.proxy(two_crawlers_config(share, parked, concurrency), name="proxy-%s" % share)
    clients = AsyncClients(proxy.port)
    base = "http://%s:%d" % (host, origin.port)
    out = {"share": share, "parked": parked, "service": service, "concurrency": concurrency}
    try:
        # A parks its requests.
        t_a = time.monotonic()
        a_futs = [clients.get("%s/a?delay=%g&i=%d" % (base, service, i), "A", {"X-Crawler": "A"})
                  for i in range(parked)]
        H.check(H.wait_until(lambda: clients.sent.get("A", 0) == parked, 60, 0.1),
                "crawler A wrote %d of its %d requests in 60 s" % (clients.sent.get("A", 0), parked))

        def a_all_in():
            m = proxy.metrics()
            held = (H.msum(m, "politeproxy_host_waiting", host=host) + H.msum(m, "politeproxy_host_in_flight", host=host)
                    + sum(1 for f in a_futs if f.done()))
            return held >= parked - concurrency and held
        held = H.wait_until(a_all_in, 60, 0.2)
        H.check(held, "A's %d requests are not all parked, in flight or answered after 60 s (%s); /hosts %s"
                % (parked, held, proxy.hosts().get(host)))
        H.log("%s: crawler A's %d requests are in (%.1f s); /hosts %s"
              % (share, parked, time.monotonic() - t_a, H.brief(proxy.hosts().get(host, {}))))

        # B at fixed ticks.
        t0 = time.monotonic()
        b_futs = []
        for k in range(b_requests):
            delay = t0 + k * b_interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            b_futs.append(clients.get("%s/b?delay=%g&k=%d" % (base, service, k), "B", {"X-Crawler": "B"}))
        during = proxy.metrics()
        out["during_client_waiting"] = {dict(ls).get("client"): v for ls, v in
                                        H.mseries(during, "politeproxy_client_waiting").items()}
        # Behind one FIFO queue B's last request waits for every A request before it.
        b_timeout = parked * service / concurrency * 1.5 + 120
        b = [f.result(b_timeout) for f in b_futs]
        out["b"] = b
        waits = [queue_wait(r) for r in b]
        out["b_waits"] = waits
        known = [w for w in waits if w is not None]
        out["b_p50"] = percentile(known, 50) if known else None
        out["b_p95"] = percentile(known, 95) if known else None
        out["b_max"] = max(known) if known else None
        out["b_client_waits"] = [r.elapsed - service for r in b if r.elapsed is not None]

        # The origin's view of B's window: whole service times from B's first send. A
        # keeps its connections until the window is over (its close would idle the host).
        window = round(b_requests * b_interval / service) * service
        out["window"] = (t0, window)
        time.sleep(max(0.0, t0 + window + 0.05 - time.monotonic()))
        st = origin.host(host)
        out["peak"] = st["peak"]
        ended = [r for r in st["requests"]
                 if r["end"] is not None and r["error"] is None and t0 <= r["end"] < t0 + window]
        out["served_in_window"] = len(ended)
        out["a_in_window"] = sum(1 for r in ended if r["target"].startswith("/a?"))
        out["b_in_window"] = sum(1 for r in ended if r["target"].startswith("/b?"))
        out["throughput"] = len(ended) / window
        out["ideal_throughput"] = concurrency / service

        # A gives up.
        a_done = [f.result() for f in a_futs if f.done()]
        out["a_done"] = a_done
        out["a_statuses"] = H.summarize(a_done)
        out["a_closed"] = clients.close_group("A")
        for f in a_futs:
            try:
                f.result(20)
            except Exception:  # noqa: BLE001 - its error is in its Result
                pass
        t_close = time.monotonic()
        last = clients.get("%s/last?delay=%g" % (base, service), "B", {"X-Crawler": "B"}, timeout=20).result(30)
        out["last"] = last

        state = [None]

        def settled():
            m = proxy.metrics()
            in_flight = H.msum(m, "politeproxy_host_in_flight", host=host)
            waiting = H.msum(m, "politeproxy_client_waiting")
            state[0] = (in_flight, waiting,
                        {dict(ls).get("client"): v for ls, v in H.mseries(m, "politeproxy_client_waiting").items()})
            return in_flight == 0 and waiting == 0
        H.wait_until(settled, 10, 0.2)
        out["after"] = state[0]
        out["after_seconds"] = time.monotonic() - t_close
        out["leaks"] = leaked(a_done + b + [last])
        out["proxy_alive"] = proxy.alive()
        out["proxy_tail"] = proxy.tail(30)
    finally:
        clients.stop()
        proxy.stop()
        origin.stop()
    return out


def describe(res):
    """One line of a scenario's figures."""
    def f(x):
        return "-" if x is None else "%.3f" % x
    return ("share=%s parked=%d: B queue wait p50 %s p95 %s max %s s; origin peak %d; %d served in %.1f s"
            " (%.2f/s, ideal %.2f/s; A %d, B %d)"
            % (res["share"], res["parked"], f(res.get("b_p50")), f(res.get("b_p95")), f(res.get("b_max")),
               res.get("peak", -1), res.get("served_in_window", -1), res["window"][1] if "window" in res else 0,
               res.get("throughput", 0), res.get("ideal_throughput", 0), res.get("a_in_window", -1),
               res.get("b_in_window", -1)))


def part_a(t):
    res = two_crawlers(t, "fair", parked=2000, b_requests=20, b_interval=1.0, service=SERVICE, concurrency=2)
    H.log("A: " + describe(res))
    H.log("A: B's queue waits %s; client-side waits beyond the service time %s"
          % (["%.3f" % w if w is not None else None for w in res["b_waits"]],
             ["%.3f" % w for w in res["b_client_waits"]]))
    H.log("A: client_waiting while B sent: %s; A's answers before the close %s; %d connections closed;"
          " after the close host_in_flight %s, client_waiting %s (%s) after %.1f s"
          % (res["during_client_waiting"], res["a_statuses"], res["a_closed"], res["after"][0],
             res["after"][1], res["after"][2], res["after_seconds"]))
    b = res["b"]
    H.check(all(r.status == 200 for r in b), "B's requests: %s (%s)" % (H.summarize(b), [r for r in b if r.status != 200][:3]))
    H.check(None not in res["b_waits"], "B's answers without queue-wait= in Proxy-Status: %s"
            % [r.header("Proxy-Status") for r in b if queue_wait(r) is None][:3])
    bound = 2 * SERVICE + ALLOWANCE
    H.check(res["b_p95"] <= bound, "B's p95 queue wait %.3f s behind A's 2000 parked requests (bound %.2f s: 2"
            " service times); waits %s" % (res["b_p95"], bound, sorted(res["b_waits"])))
    H.check(res["peak"] == 2, "the origin's peak in-flight for %s was %d, the bound is 2" % (HOST, res["peak"]))
    ideal = res["ideal_throughput"]
    H.check(abs(res["throughput"] - ideal) <= THROUGHPUT_TOLERANCE * ideal,
            "the host's throughput during B's window was %.2f/s (%d responses in %.1f s), want %.1f/s within %d%%"
            % (res["throughput"], res["served_in_window"], res["window"][1], ideal, THROUGHPUT_TOLERANCE * 100))
    H.check(res["during_client_waiting"].get("A", 0) > 1000,
            "client_waiting while B sent: %s (A had ~1800 requests parked)" % res["during_client_waiting"])
    H.check(set(res["a_statuses"]) <= {200}, "A's requests answered before it closed: %s" % res["a_statuses"])
    H.check(res["a_closed"] > 1000, "A had only %d connections open when it gave up (of 2000, ~300 answered)"
            % res["a_closed"])
    H.check(res["proxy_alive"], "the proxy died after A closed its connections:\n%s" % res["proxy_tail"])
    H.check(res["last"].status == 200, "the last request after A closed its connections: %s" % res["last"])
    H.check(res["after"][0] == 0 and res["after"][1] == 0,
            "after A closed its connections: host_in_flight %s, client_waiting %s (%s)" % res["after"])
    H.check(not res["leaks"], "the origin saw X-Crawler on %d requests: %s" % (len(res["leaks"]), res["leaks"][:3]))
    H.check(len(res["a_done"]) > 100 and all(echoed_fields(r) is not None for r in res["a_done"][:50]),
            "the origin's echo of A's requests is missing: cannot tell whether X-Crawler reached it")


# -- part B -----------------------------------------------------------------------------
def part_b(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=2, rate=1000, burst=2, adaptive={"enabled": False})
    cfg["clients"] = {"identify_by": "header:X-Crawler", "share": "fair", "weights": {"heavy": 4, "light": 1}}
    proxy = t.proxy(cfg, name="proxy-weights")
    clients = AsyncClients(proxy.port)
    base = "http://%s:%d" % (WEIGHTS_HOST, origin.port)
    try:
        t_start = time.monotonic()
        until = t_start + WEIGHTS_SECONDS
        futs = {name: clients.keep_busy(
            lambda i, k, name=name: "%s/w?c=%s&delay=%g&i=%d&k=%d" % (base, name, WEIGHTS_SERVICE, i, k),
            name, WEIGHTS_OUTSTANDING, until, {"X-Crawler": name}) for name in ("heavy", "light")}
        results = {name: f.result(WEIGHTS_SECONDS + 60) for name, f in futs.items()}
    finally:
        clients.stop()
    for name, rs in results.items():
        bad = [r for r in rs if r.status != 200]
        H.check(not bad, "%s: %d of %d requests not answered 200: %s %s"
                % (name, len(bad), len(rs), H.summarize(rs), bad[:3]))
    st = origin.host(WEIGHTS_HOST)
    recs = [r for r in st["requests"] if t_start + 2 <= r["start"] < until]
    served = {name: sum(1 for r in recs if "c=%s&" % name in r["target"]) for name in ("heavy", "light")}
    total = served["heavy"] + served["light"]
    share = served["heavy"] / total if total else 0.0
    H.log("B: %.0f s at concurrency 2, %.0f ms per response: the origin served heavy %d, light %d (heavy's share"
          " %.3f; %.1f/s in all), peak %d"
          % (WEIGHTS_SECONDS - 2, WEIGHTS_SERVICE * 1000, served["heavy"], served["light"], share,
             total / (until - t_start - 2), st["peak"]))
    H.check(total > 0.4 * (WEIGHTS_SECONDS - 2) * 2 / WEIGHTS_SERVICE,
            "only %d requests served in %.0f s at concurrency 2 and %.0f ms each"
            % (total, WEIGHTS_SECONDS - 2, WEIGHTS_SERVICE * 1000))
    H.check(0.75 <= share <= 0.85, "weights 4:1: heavy's share of the slots was %.3f (%d of %d), want 0.80 +- 0.05"
            % (share, served["heavy"], total))
    H.check(st["peak"] == 2, "the origin's peak for %s was %d, the bound is 2" % (WEIGHTS_HOST, st["peak"]))
    ok = {name: sum(1 for r in rs if r.status == 200) for name, rs in results.items()}
    m = H.metrics_when(proxy, "politeproxy_client_requests_total", ok["heavy"] + ok["light"], outcome="ok")
    counted = {name: H.mget(m, "politeproxy_client_requests_total", 0, client=name, outcome="ok") for name in ok}
    H.check(counted == ok, "client_requests_total{outcome=\"ok\"}: %s, the clients got %s 200s"
            % (counted, ok))
    H.check(not leaked(results["heavy"] + results["light"]), "the origin saw X-Crawler")


def test(t):
    part_a(t)
    part_b(t)


if __name__ == "__main__":
    H.main(test, timeout=200)
