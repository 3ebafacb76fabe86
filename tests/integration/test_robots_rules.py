#!/usr/bin/python3
"""robots.disallow: enforce, and robots.txt status handling as RFC 9309 2.3.1 has it.

A: rules.test's robots.txt (answered after 0.3 s) disallows /private (but allows
   /private/open), `/*.php$` and `/search*q=`. Of parallel first requests none reaches
   the origin before robots.txt was read; disallowed paths are answered 403 with
   `Proxy-Status: politeproxy; error=http_request_denied; details="robots.txt"` and never
   reach the origin; allowed ones pass. A GoodBot User-Agent matches its own group (Allow: /).
B: down.test's robots.txt answers 503: every request gets 503 with Retry-After and none
   reaches the origin; once robots.txt answers 200 and the backoff (1 s) has passed, the
   next request reads it again and goes through.
C: gone.test's robots.txt answers 404: everything is allowed.
D: moved.test's robots.txt redirects (301) to rules-home.test's: its rules apply to
   moved.test; loop.test redirects to itself forever: after 5 hops it counts as a 4xx
   (no restrictions).
E: robots.user_agent fixed ("PoliteBot"): the group for PoliteBot applies whatever the
   request's User-Agent.
F: challenge.test answers its robots.txt with a challenge page (200, `cf-mitigated:
   challenge`, a throttle signal): that is not the file; requests get 503 with Retry-After.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RULES = """# RFC 9309 style
User-agent: *
Disallow: /private
Allow: /private/open
Disallow: /*.php$
Disallow: /search*q=

User-agent: GoodBot
Allow: /
"""


def robots_requests(origin, host):
    return [r for r in origin.host(host)["requests"] if r["target"] == "/robots.txt"]


def others(origin, host):
    return [r for r in origin.host(host)["requests"] if r["target"] != "/robots.txt"]


def check_denied(r, what):
    status = r.header("Proxy-Status") or ""
    H.check(r.status == 403 and "error=http_request_denied" in status and 'details="robots.txt"' in status,
            "%s should be 403 by robots.txt: %s %s" % (what, r.status, r.headers))


def test(t):
    origin = t.origin()
    port = origin.port
    origin.set_robots("rules.test", RULES, delay=0.3)
    origin.set_robots("down.test", "User-agent: *\nAllow: /\n", status=503)
    origin.set_robots("gone.test", "User-agent: *\nDisallow: /\n", status=404)
    origin.set_robots("moved.test", "", status=301,
                      headers=[("Location", "http://rules-home.test:%d/robots.txt" % port)])
    origin.set_robots("rules-home.test", "User-agent: *\nDisallow: /moved-secret\n")
    origin.set_robots("loop.test", "", status=302, headers=[("Location", "/robots.txt")])
    origin.set_robots("challenge.test", "<html>checking your browser</html>", headers=[("cf-mitigated", "challenge")])
    cfg = H.base_config(concurrency=4, rate=100, burst=100,
                        backoff={"initial": "1s", "max": "4s", "jitter": 0},
                        throttle={"headers": {"cf-mitigated": "^challenge$"}})
    cfg["robots"] = {"disallow": "enforce", "cache_ttl": "1h"}
    proxy = t.proxy(cfg)
    base = "http://rules.test:%d" % port

    # A
    paths = {"/private/x": 403, "/private/open/y": 200, "/index.php": 403, "/index.php?x=1": 200,
             "/index.php5": 200, "/search?q=1": 403, "/search?page=2": 200, "/public": 200, "/": 200}
    results = H.concurrent(proxy, [base + p for p in paths], timeout=30, headers={"User-Agent": "TestCrawler/1.0"})
    for (path, want), r in zip(paths.items(), results):
        if want == 403:
            check_denied(r, "rules.test" + path)
        else:
            H.check(r.status == 200, "rules.test%s should pass: %s" % (path, r))
    fetched = robots_requests(origin, "rules.test")
    passed = others(origin, "rules.test")
    H.check(len(fetched) == 1, "rules.test: robots.txt asked %d times" % len(fetched))
    H.check(all(r["start"] >= fetched[0]["end"] for r in passed),
            "a request reached rules.test before its robots.txt was read")
    seen = sorted(r["target"] for r in passed)
    want_seen = sorted(p for p, s in paths.items() if s == 200)
    H.check(seen == want_seen, "rules.test: the origin saw %s, expected only %s" % (seen, want_seen))
    r = H.request(proxy, base + "/private/x", headers={"User-Agent": "Mozilla/5.0 (compatible; GoodBot/2.1)"})
    H.check(r.status == 200, "GoodBot has its own group (Allow: /): %s" % r)
    m = proxy.metrics()
    H.check(H.mget(m, "politeproxy_rejected_total", reason="robots_disallowed") == 3,
            "rejected_total{reason=robots_disallowed}: %s" % H.mseries(m, "politeproxy_rejected_total"))

    # B
    down = "http://down.test:%d" % port
    results = H.concurrent(proxy, [down + "/b?i=%d" % i for i in range(3)], timeout=30)
    for r in results:
        H.check(r.status == 503 and r.header("Retry-After") and "robots.txt" in (r.header("Proxy-Status") or ""),
                "down.test (robots.txt 503) should answer 503 with Retry-After: %s %s" % (r.status, r.headers))
    H.check(not others(origin, "down.test"), "down.test: a request reached the origin: %s" % others(origin, "down.test"))
    t503 = time.monotonic()
    origin.set_robots("down.test", "User-agent: *\nAllow: /\n")
    r = H.request(proxy, down + "/b?i=early")
    H.check(r.status == 503 and len(robots_requests(origin, "down.test")) == 1,
            "down.test within the backoff: %s, robots.txt asked %d times"
            % (r.status, len(robots_requests(origin, "down.test"))))
    time.sleep(max(0.0, 1.2 - (time.monotonic() - t503)))
    r = H.request(proxy, down + "/b?i=later")
    H.check(r.status == 200, "down.test after its robots.txt came back: %s" % r)
    H.check(len(robots_requests(origin, "down.test")) == 2, "down.test: robots.txt read again once")

    # C
    r = H.request(proxy, "http://gone.test:%d/anything" % port)
    H.check(r.status == 200, "gone.test (robots.txt 404: no restrictions): %s" % r)

    # D
    check_denied(H.request(proxy, "http://moved.test:%d/moved-secret" % port), "moved.test/moved-secret")
    r = H.request(proxy, "http://moved.test:%d/elsewhere" % port)
    H.check(r.status == 200, "moved.test/elsewhere: %s" % r)
    H.check(len(robots_requests(origin, "rules-home.test")) == 1, "the redirect was not followed")
    r = H.request(proxy, "http://loop.test:%d/x" % port)
    H.check(r.status == 200, "loop.test (endless redirects: no restrictions): %s" % r)
    hops = len(robots_requests(origin, "loop.test"))
    H.check(hops == 6, "loop.test: %d robots.txt requests; the first and 5 redirects expected" % hops)

    # F
    r = H.request(proxy, "http://challenge.test:%d/x" % port)
    H.check(r.status == 503 and r.header("Retry-After") and not others(origin, "challenge.test"),
            "challenge.test (robots.txt behind a challenge page): %s %s" % (r.status, r.headers))

    # E
    origin.set_robots("fixed.test", "User-agent: *\nAllow: /\n\nUser-agent: PoliteBot\nDisallow: /\n")
    cfg["robots"]["user_agent"] = "PoliteBot"
    fixed = t.proxy(cfg, name="fixed-agent")
    check_denied(H.request(fixed, "http://fixed.test:%d/x" % port, headers={"User-Agent": "Other/1.0"}),
                 "fixed.test with robots.user_agent PoliteBot")
    H.check(not others(origin, "fixed.test"), "fixed.test: a request reached the origin")


if __name__ == "__main__":
    H.main(test, timeout=60)
