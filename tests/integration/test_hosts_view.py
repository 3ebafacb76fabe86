#!/usr/bin/python3
"""GET /hosts on the admin listener: a JSON array with one object per tracked host,
each with key, limit, configured_limit, stream_ceiling (null: no HTTP/2 origin), upstream_protocol,
in_flight, waiting, rate, configured_rate, paused_until (RFC 3339 or null),
paused_seconds, override_reason (or null), p95_seconds, baseline_seconds and
latency_at_limit_seconds (or null), last_change (why and when the limit last moved, or
null) and enforce. Checked
for: an override with a reason under load (in_flight 3, waiting 2), a plain host, a host
paused by a 429 with Retry-After 5 and an observe-only host. GET /api/hosts lists them in
pages, busiest first, each page with the totals over all of them. /readyz answers 200
"ready"."""
import datetime
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

WIDE = "api.test"
PLAIN = "plain.test"
PAUSED = "paused.test"
WATCH = "watch.test"
FLIGHT = "zz-flight.test"  # one request in flight, none waiting
REASON = "integration test: documented limit 3 (hosts view)"
FIELDS = ("key", "limit", "configured_limit", "stream_ceiling", "upstream_protocol", "in_flight", "waiting", "rate",
          "configured_rate", "paused_until", "paused_seconds", "override_reason",
          "p95_seconds", "baseline_seconds", "latency_at_limit_seconds", "last_change", "enforce")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def get_hosts(proxy):
    status, headers, body = proxy.admin_get("/hosts")
    H.check(status == 200, "GET /hosts answered %d: %r" % (status, body[:300]))
    ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "")
    H.check("application/json" in ctype, "GET /hosts Content-Type is %r" % ctype)
    try:
        hosts = json.loads(body.decode())
    except ValueError as e:
        raise H.TestFailure("GET /hosts is not JSON (%s): %r" % (e, body[:500]))
    H.check(isinstance(hosts, list), "GET /hosts is not a JSON array: %r" % body[:300])
    by_key = {}
    for h in hosts:
        H.check(isinstance(h, dict), "a /hosts entry is not an object: %r" % (h,))
        missing = [f for f in FIELDS if f not in h]
        H.check(not missing, "/hosts entry lacks %s: %s" % (missing, h))
        by_key[h["key"]] = h
    return by_key, body


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_types(h):
    for f in ("limit", "configured_limit", "in_flight", "waiting"):
        H.check(isinstance(h[f], int) and not isinstance(h[f], bool) and h[f] >= 0,
                "/hosts %s: %s should be a non-negative integer: %s" % (h["key"], f, h))
    for f in ("rate", "configured_rate", "paused_seconds"):
        H.check(is_num(h[f]) and h[f] >= 0, "/hosts %s: %s should be a number: %s"
                % (h["key"], f, h))
    H.check(h["stream_ceiling"] is None and h["upstream_protocol"] == "http/1.1",
            "/hosts %s: stream_ceiling or h2 without an HTTP/2 origin: %s" % (h["key"], h))
    H.check(h["p95_seconds"] is None or (is_num(h["p95_seconds"]) and h["p95_seconds"] >= 0),
            "/hosts %s: p95_seconds should be a number or null: %s" % (h["key"], h))
    H.check(isinstance(h["enforce"], bool), "/hosts %s: enforce should be a boolean: %s"
            % (h["key"], h))
    H.check(h["override_reason"] is None or isinstance(h["override_reason"], str),
            "/hosts %s: override_reason should be a string or null: %s" % (h["key"], h))
    H.check(h["paused_until"] is None or (isinstance(h["paused_until"], str) and
                                          RFC3339.match(h["paused_until"])),
            "/hosts %s: paused_until should be RFC 3339 or null: %s" % (h["key"], h))


def parse_rfc3339(s):
    s = s.replace("Z", "+00:00")
    if "." in s:  # fromisoformat before 3.11 wants exactly 3 or 6 fraction digits
        head, rest = s.split(".", 1)
        digits = re.match(r"\d+", rest).group(0)
        s = head + "." + (digits + "000000")[:6] + rest[len(digits):]
    return datetime.datetime.fromisoformat(s).timestamp()


def api_page(proxy, query):
    status, _, body = proxy.admin_get("/api/hosts?" + query)
    H.check(status == 200, "GET /api/hosts?%s answered %d: %r" % (query, status, body[:300]))
    return json.loads(body.decode())


def check_listing(proxy):
    """GET /api/hosts in pages of 2, busiest first (most waiting, then most in flight, then
    by key: FLIGHT, one in flight and none waiting, comes before the idle hosts although
    its key sorts after them), each page with the totals over every host (what the
    status page draws its summary from at any number of hosts)."""
    def busy_first():
        page = api_page(proxy, "sort=waiting&limit=2")
        got = {h["key"]: h for h in page["hosts"]}
        loaded = (got.get(WIDE, {}).get("waiting") == 2 and got.get(WIDE, {}).get("in_flight") == 3
                  and got.get(FLIGHT, {}).get("in_flight") == 1)
        return page if loaded else None
    page = H.wait_until(busy_first, 1.0, interval=0.05) or api_page(proxy, "sort=waiting&limit=2")
    H.log("/api/hosts?sort=waiting&limit=2: %s" % json.dumps(page))
    H.check([h["key"] for h in page["hosts"]] == [WIDE, FLIGHT] and page["next"] == FLIGHT,
            "the first page should be %s (2 waiting), then %s (1 in flight, none waiting): %s"
            % (WIDE, FLIGHT, json.dumps(page)))
    total = {"hosts": 5, "in_flight": 4, "waiting": 2, "paused": 1}
    H.check(page.get("total") == total, "/api/hosts total %r, expected %r" % (page.get("total"), total))
    # The next page: the idle hosts by key (the load may have moved on: only the count is sure).
    rest = api_page(proxy, "sort=waiting&limit=2&after=" + FLIGHT)
    H.check([h["key"] for h in rest["hosts"]] == [PAUSED, PLAIN] and rest["next"] == PLAIN
            and rest.get("total", {}).get("hosts") == 5, "the second page: %s" % json.dumps(rest))


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(
        concurrency=2, rate=100, burst=100,
        backoff={"initial": "1s", "max": "10s", "jitter": 0},  # Retry-After 5 decides
        hosts={WIDE: {"concurrency": 3, "reason": REASON},
               WATCH: {"enforce": False}}))

    status, _, body = proxy.admin_get("/readyz")
    H.check(status == 200 and body.strip() == b"ready",
            "/readyz answered %d %r while serving, expected 200 'ready'" % (status, body))
    hosts, body = get_hosts(proxy)
    H.log("/hosts before traffic: %r" % body[:200])

    # a plain host and an observe-only host, one request each
    for host in (PLAIN, WATCH):
        r = H.request(proxy, "http://%s:%d/one" % (host, origin.port))
        H.check(r.error is None and r.status == 200, "%s: %r" % (host, r))
    # a paused host
    r = H.request(proxy, "http://%s:%d/p?status=429&retry_after=5" % (PAUSED, origin.port))
    H.check(r.error is None and r.status == 429, "%s: %r" % (PAUSED, r))
    t_pause = time.time()
    # the override under load: 5 slow requests at concurrency 3
    bg = H.Background(proxy, ["http://%s:%d/w?delay=1.5&i=%d" % (WIDE, origin.port, i)
                              for i in range(5)], timeout=20)
    one = H.Background(proxy, ["http://%s:%d/w?delay=1.5" % (FLIGHT, origin.port)], timeout=20)
    H.check(H.wait_until(lambda: origin.host(WIDE)["in_flight"] == 3, 2.0),
            "3 requests to %s never were in flight at once: %s"
            % (WIDE, H.brief(origin.host(WIDE))))

    def loaded():
        hs, _ = get_hosts(proxy)
        w = hs.get(WIDE)
        return w is not None and w["in_flight"] == 3 and w["waiting"] == 2 and hs
    hosts = H.wait_until(loaded, 1.0, interval=0.05) or get_hosts(proxy)[0]
    check_listing(proxy)
    for k in (WIDE, PLAIN, PAUSED, WATCH):
        H.check(k in hosts, "/hosts has no entry for %s; keys: %s" % (k, sorted(hosts)))
        H.log("/hosts %s" % json.dumps(hosts[k]))
        check_types(hosts[k])

    w = hosts[WIDE]
    H.check(w["override_reason"] == REASON, "/hosts %s: override_reason %r, expected %r"
            % (WIDE, w["override_reason"], REASON))
    H.check(w["configured_limit"] == 3 and w["limit"] == 3,
            "/hosts %s: limit %s / configured_limit %s, expected 3 / 3 (override)"
            % (WIDE, w["limit"], w["configured_limit"]))
    H.check(w["in_flight"] == 3 and w["waiting"] == 2,
            "/hosts %s with 5 requests at concurrency 3: in_flight %s waiting %s, expected"
            " 3 and 2" % (WIDE, w["in_flight"], w["waiting"]))
    H.check(w["enforce"] is True, "/hosts %s: enforce %r" % (WIDE, w["enforce"]))
    H.check(w["paused_until"] is None and w["paused_seconds"] == 0,
            "/hosts %s is not paused: %s" % (WIDE, w))
    H.check(w["configured_rate"] == 100 and w["rate"] == 100,
            "/hosts %s: rate %s / configured_rate %s, expected 100 / 100"
            % (WIDE, w["rate"], w["configured_rate"]))

    p = hosts[PLAIN]
    H.check(p["override_reason"] is None, "/hosts %s has no override, but override_reason"
            " is %r" % (PLAIN, p["override_reason"]))
    H.check(p["configured_limit"] == 2 and p["limit"] == 2 and p["in_flight"] == 0
            and p["waiting"] == 0, "/hosts %s: %s" % (PLAIN, p))
    H.check(p["paused_until"] is None and p["paused_seconds"] == 0,
            "/hosts %s is not paused: %s" % (PLAIN, p))
    H.check(p["enforce"] is True, "/hosts %s: enforce %r" % (PLAIN, p["enforce"]))

    q = hosts[PAUSED]
    H.check(q["limit"] == 1 and q["configured_limit"] == 2,
            "/hosts %s after a 429: limit %s (expected 1), configured_limit %s (expected 2)"
            % (PAUSED, q["limit"], q["configured_limit"]))
    H.check(q["rate"] == 50 and q["configured_rate"] == 100,
            "/hosts %s after a 429: rate %s (expected 50, halved), configured_rate %s"
            % (PAUSED, q["rate"], q["configured_rate"]))
    H.check(isinstance(q["paused_until"], str),
            "/hosts %s after a 429 with Retry-After 5: paused_until is %r, expected an"
            " RFC 3339 time" % (PAUSED, q["paused_until"]))
    until = parse_rfc3339(q["paused_until"]) - t_pause
    H.check(3.0 <= until <= 6.5, "/hosts %s: paused_until %s is %.1fs from the 429, expected"
            " ~5 s" % (PAUSED, q["paused_until"], until))
    H.check(isinstance(q["last_change"], dict) and q["last_change"].get("reason") == "throttled"
            and 0 <= q["last_change"].get("seconds_ago", -1) <= 10,
            "/hosts %s after a 429: last_change %r, expected reason throttled a moment ago"
            % (PAUSED, q["last_change"]))
    H.check(p["last_change"] is None, "/hosts %s never changed its limit: last_change %r"
            % (PLAIN, p["last_change"]))
    H.check(q["baseline_seconds"] is None,
            "/hosts %s: a baseline after one response: %r" % (PAUSED, q["baseline_seconds"]))
    H.check(3.0 <= q["paused_seconds"] <= 5.05,
            "/hosts %s: paused_seconds %s, expected ~5 (Retry-After 5)"
            % (PAUSED, q["paused_seconds"]))

    v = hosts[WATCH]
    H.check(v["enforce"] is False, "/hosts %s (enforce: false override): enforce %r"
            % (WATCH, v["enforce"]))

    results = bg.wait(20) + one.wait(20)
    bad = [r for r in results if r.error or r.status != 200]
    H.check(not bad, "%d requests to %s did not get 200: %s" % (len(bad), WIDE, bad))
    # A client can have its last byte (and ask /hosts) before the worker that wrote it
    # has run on to release the permit: the view settles within a moment.
    def settled():
        w = get_hosts(proxy)[0].get(WIDE)
        return w if w is not None and w["in_flight"] == 0 and w["waiting"] == 0 else None
    w = H.wait_until(settled, 1.0 * H.SLOW) or get_hosts(proxy)[0].get(WIDE)
    H.check(w is not None and w["in_flight"] == 0 and w["waiting"] == 0,
            "/hosts %s a second after the requests finished: %s" % (WIDE, w))
    H.log("/hosts %s after: %s" % (WIDE, json.dumps(w)))
    H.check(w["p95_seconds"] is None or 1.3 <= w["p95_seconds"] <= 3.0,
            "/hosts %s: p95_seconds %s after five 1.5 s responses"
            % (WIDE, w["p95_seconds"]))


if __name__ == "__main__":
    H.main(test, timeout=30)
