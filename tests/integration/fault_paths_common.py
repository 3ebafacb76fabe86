"""What the fault-path tests share (test_fault_paths_origin.py: the origin fails;
test_fault_paths_client.py: the client gives up): the proxy (one host name
faults.test, concurrency 2, a high rate, short timeouts, adaptive off, backoff 100ms
without jitter) in front of a FaultOrigin, a client that reads to EOF or to a byte
count, the three runs of each fault (RUNS), the host's gauges, and the checks that no
slot leaked: settle() (not paused, nothing in flight or waiting), probe() (2 slow
requests in flight together at the origin) and finish() (4 slow requests, the origin
sees exactly 2 at once; the proxy alive, /healthz answering)."""
import time

import harness as H
from fault_origin import SLOW, FaultOrigin

HOST = "faults.test"


def start(t):
    """The FaultOrigin (t.o) and the proxy in front of it."""
    t.o = FaultOrigin()
    t.origins.append(t.o)
    H.log("fault origin on 127.0.0.1:%d" % t.o.port)
    proxy = t.proxy(H.base_config(
        concurrency=2, rate=1000, burst=1000,
        timeouts={"connect": "2s", "response_headers": "1s", "idle": "2s"},
        # off: only incidents act; a collapsed limit then steps back once per grow_interval
        adaptive={"enabled": False, "grow_interval": "200ms"},
        backoff={"initial": "100ms", "max": "100ms", "jitter": 0}))
    return proxy


def case_runner(proxy, failures):
    """case(name, fn): runs fn(); a failed check is kept in `failures` (the next case runs),
    and the proxy must still be alive afterwards."""

    def case(name, fn):
        try:
            fn()
            H.log("case %s: ok" % name)
        except AssertionError as e:
            H.log("case %s: FAILED: %s" % (name, e))
            failures.append("case %s: %s" % (name, e))
        except OSError as e:  # e.g. the proxy port refusing: it died (checked below)
            H.log("case %s: FAILED: %s: %s" % (name, type(e).__name__, e))
            failures.append("case %s: %s: %s" % (name, type(e).__name__, e))
        H.check(proxy.alive(), "the proxy died (exit code %s) during case %s; output:\n%s"
                "\nchecks failed before: %s" % (proxy.proc.poll(), name, proxy.tail(),
                                                failures))
    return case


class Client(H.RawClient):
    """Reads to EOF or to a byte count (self.raw keeps every byte, see harness)."""

    def read_until_eof(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.eof and self._fill(deadline):
            pass
        return self.eof

    def read_at_least(self, n, timeout):
        deadline = time.monotonic() + timeout
        while len(self.raw) < n and self._fill(deadline):
            pass
        return len(self.raw) >= n


def get_bytes(port, path, tag):
    sep = "&" if "?" in path else "?"
    return H.raw_get(0, HOST, port, "%s%stag=%s" % (path, sep, tag), connection="keep-alive")


def proxy_status(r):
    return r.header("Proxy-Status") or ""


RUNS = (("a", 1), ("b", 1), ("pair", 2))  # once, once more, two at once


def gauges(proxy):
    m = proxy.metrics()
    return {k: H.mget(m, "politeproxy_" + k, host=HOST)
            for k in ("host_in_flight", "host_waiting", "host_paused_seconds",
                      "host_concurrency_limit", "host_rate_limit")}


def settle(proxy, what):
    """Wait until the host is not paused, then until in_flight and waiting are 0."""
    t0 = time.monotonic()
    unpaused = H.wait_until(lambda: gauges(proxy)["host_paused_seconds"] in (None, 0), 5.0)
    g = gauges(proxy)
    H.check(unpaused, "%s: host_paused_seconds{host=%s} still %s after 5s (backoff 100ms);"
            " gauges %s" % (what, HOST, g["host_paused_seconds"], g))
    idle = H.wait_until(lambda: all(gauges(proxy)[k] in (None, 0)
                                    for k in ("host_in_flight", "host_waiting")), 3.0)
    g = gauges(proxy)
    H.check(idle, "%s: a slot leaked: 3s after the host stopped being paused,"
            " host_in_flight=%s host_waiting=%s (expected 0 or absent); gauges %s"
            % (what, g["host_in_flight"], g["host_waiting"], g))
    H.log("%s: settled in %.2fs, gauges %s" % (what, time.monotonic() - t0, g))
    return g


def slow_batch(t, proxy, n, tag, what):
    """n slow (1s) requests at once: all 200; returns the origin's peak for them."""
    o = t.o
    url = "http://%s:%d/slow?tag=%s" % (HOST, o.port, tag)
    t0 = time.monotonic()
    res = H.concurrent(proxy, [url + "&i=%d" % i for i in range(n)], timeout=15)
    took = time.monotonic() - t0
    bad = [r for r in res if r.error or r.status != 200]
    H.check(not bad, "%s: %d of %d slow requests did not get 200: %s; %s"
            % (what, len(bad), n, res, o.summary("/slow")))
    recs = o.recs("/slow", tag)
    H.check(len(recs) == n, "%s: the origin saw %d of the %d requests; %s"
            % (what, len(recs), n, o.summary("/slow")))
    peak = H.overlap_peak(recs)
    H.log("%s: %d x 200 in %.2fs, origin peak %d" % (what, n, took, peak))
    return peak, took


def probe(t, proxy, faults):
    """Nothing leaked by the faults so far (before any incident collapses the limit)."""
    g = settle(proxy, "after faults %s" % faults)
    peak, took = slow_batch(t, proxy, 2, "probe", "probe after faults %s" % faults)
    H.check(peak == 2, "probe after faults %s: 2 slow requests were not in"
            " flight together at the origin (peak %d, %.2fs; gauges before %s): a slot"
            " leaked" % (faults, peak, took, g))


def finish(t, proxy, failures):
    """After all faults: no slot leaked, the proxy alive and healthy; then every failure."""
    g = settle(proxy, "after all faults")
    time.sleep(0.5)  # past a grow_interval: the collapsed limit may step back to 2
    peak, took = slow_batch(t, proxy, 4, "final", "final batch")
    if peak != 2:
        hint = ""
        if g["host_concurrency_limit"] is not None and g["host_concurrency_limit"] < 2:
            hint = (" The host's limit itself was %s, not 2, once the pause had ended: the"
                    " refused/closed incidents (faults 1 and 5) collapsed it and it did not"
                    " step back after the pause (grow_interval 200ms)."
                    % g["host_concurrency_limit"])
        failures.append(
            "final batch: 4 slow (%.0fs) requests, the origin saw a peak of %d in flight at"
            " once (expected exactly 2 = concurrency; took %.2fs). Gauges before the batch:"
            " host_concurrency_limit=%s host_rate_limit=%s host_in_flight=%s"
            " host_waiting=%s host_paused_seconds=%s.%s"
            % (SLOW, peak, took, g["host_concurrency_limit"], g["host_rate_limit"],
               g["host_in_flight"], g["host_waiting"], g["host_paused_seconds"], hint))
    H.check(proxy.alive(), "the proxy died; output:\n%s" % proxy.tail())
    status, _, body = proxy.admin_get("/healthz")
    H.check(status == 200, "/healthz answered %d %r" % (status, body[:200]))
    g2 = settle(proxy, "after the final batch")
    H.log("final gauges %s" % g2)
    H.check(not failures, "%d check(s) failed:\n  %s"
            % (len(failures), "\n  ".join(failures)))
