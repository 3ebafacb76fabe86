#!/usr/bin/python3
"""defaults.throttle: what in an origin's answer says "slow down" (collapse to 1, halve the
rate, pause), per host.

A: cdn.test lists 403 among its throttle statuses: one 403 collapses its limit to 1,
   halves its rate, pauses it, and counts as throttled; the next request waits out the
   pause (the origin sees nothing meanwhile).
B: plain.test keeps the defaults (429, 503): a 403 is an answer like any other.
C: `defaults.throttle.headers: {cf-mitigated: "^challenge$"}`: a 200 carrying
   `cf-mitigated: challenge` throttles challenge.test; `cf-mitigated: other` does not.
D: quiet.test drops 503 from its statuses: its 503 is an answer.
E: inside intercepted TLS each request is judged the same way: tls.test (403 listed)
   collapses on an HTTPS 403.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

PAUSE = 2.0


def host_state(proxy, host):
    m = proxy.metrics()
    return {"limit": H.mget(m, "politeproxy_host_concurrency_limit", host=host),
            "rate": H.mget(m, "politeproxy_host_rate_limit", host=host),
            "paused": H.mget(m, "politeproxy_host_paused_seconds", host=host),
            "throttled": H.mget(m, "politeproxy_requests_total", 0, host=host, outcome="throttled"),
            "ok": H.mget(m, "politeproxy_requests_total", 0, host=host, outcome="ok")}


def get(proxy, origin, host, query):
    r = H.request(proxy, "http://%s:%d/x?%s" % (host, origin.port, query))
    H.check(r.error is None, "%s: %r" % (host, r))
    return r


def check_throttled(proxy, host, why):
    s = H.wait_until(lambda: (lambda s: s["throttled"] == 1 and s)(host_state(proxy, host)), 3.0) \
        or host_state(proxy, host)
    H.log("%s after %s: %s" % (host, why, s))
    H.check(s["throttled"] == 1, "%s: %s should count as throttled: %s" % (host, why, s))
    H.check(s["limit"] == 1, "%s: %s should collapse the limit to 1: %s" % (host, why, s))
    H.check(s["rate"] == 50, "%s: %s should halve the rate 100 -> 50: %s" % (host, why, s))
    H.check(s["paused"] is not None and 0 < s["paused"] <= PAUSE + 0.1,
            "%s: %s should pause the host (backoff.initial %ss): %s" % (host, why, PAUSE, s))


def check_answered(proxy, host, why):
    s = H.wait_until(lambda: (lambda s: s["ok"] >= 1 and s)(host_state(proxy, host)), 3.0) \
        or host_state(proxy, host)
    H.log("%s after %s: %s" % (host, why, s))
    H.check(s["ok"] >= 1 and s["throttled"] == 0, "%s: %s should count as ok: %s" % (host, why, s))
    H.check(s["limit"] == 4 and s["rate"] == 100 and not s["paused"],
            "%s: %s should leave the gate alone: %s" % (host, why, s))


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=4, rate=100, burst=100,
                        adaptive={"enabled": False},
                        backoff={"initial": "%ds" % PAUSE, "max": "10s", "jitter": 0},
                        throttle={"headers": {"cf-mitigated": "^challenge$"}},
                        hosts={"cdn.test": {"throttle": {"statuses": [403, 429, 503]}},
                               "quiet.test": {"throttle": {"statuses": [429]}}})
    proxy = t.proxy(cfg)

    # A
    r = get(proxy, origin, "cdn.test", "status=403")
    H.check(r.status == 403, "cdn.test: the origin's 403 should reach the client: %r" % r)
    t403 = time.monotonic()
    check_throttled(proxy, "cdn.test", "a 403 listed in throttle.statuses")
    r = get(proxy, origin, "cdn.test", "i=after")
    after = [x for x in origin.host("cdn.test")["requests"] if "i=after" in x["target"]]
    H.check(r.status == 200 and len(after) == 1, "cdn.test after the pause: %r %r" % (r, after))
    H.check(after[0]["start"] - t403 >= PAUSE - 0.3,
            "cdn.test: the request after the 403 reached the origin %.2fs later; the pause is %ss"
            % (after[0]["start"] - t403, PAUSE))

    # B
    r = get(proxy, origin, "plain.test", "status=403")
    H.check(r.status == 403, "plain.test: %r" % r)
    check_answered(proxy, "plain.test", "a 403 with the default statuses")

    # C
    r = get(proxy, origin, "other.test", "header=cf-mitigated:other")
    check_answered(proxy, "other.test", "cf-mitigated: other")
    r = get(proxy, origin, "challenge.test", "header=cf-mitigated:challenge")
    H.check(r.status == 200 and r.header("cf-mitigated") == "challenge", "challenge.test: %r" % r)
    check_throttled(proxy, "challenge.test", "cf-mitigated: challenge")

    # D
    r = get(proxy, origin, "quiet.test", "status=503")
    H.check(r.status == 503, "quiet.test: %r" % r)
    check_answered(proxy, "quiet.test", "a 503 its statuses leave out")

    # E
    ca_cert, ca_key = t.gen_ca()
    tls_origin = t.origin(tls=True)  # its certificate names tls.test
    origin_cert, _ = t.cert()
    cfg = dict(cfg, hosts={"tls.test": {"throttle": {"statuses": [403]}}})
    cfg["security"] = dict(cfg["security"], connect_ports=[443, tls_origin.port])
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    intercepting = t.proxy(cfg, name="intercept")
    r = H.https_session(intercepting, ca_cert).get("https://tls.test:%d/x?status=403" % tls_origin.port, timeout=20)
    H.check(r.status_code == 403, "https://tls.test/x?status=403: %d" % r.status_code)
    check_throttled(intercepting, "tls.test", "an intercepted 403 listed in throttle.statuses")


if __name__ == "__main__":
    H.main(test, timeout=40)
