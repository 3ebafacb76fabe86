#!/usr/bin/python3
"""The control API alone (no fleet): per-host overrides through the admin listener.

A: writes without a token, or with a wrong one, are 401 and change nothing; raising the
   concurrency above the defaults without a reason is a 400 naming "reason"; a body that
   is not an override is a 400 naming its field.
B: a pause (pause_for 2s) on paused.test holds its queue: the origin sees nothing until
   it ends, then the parked requests go; a request parked past queue.max_wait (short.test,
   1 s, paused 5 s) gets 503 with Retry-After; /hosts, /api/hosts/{key}, /api/overrides and
   host_override_info{source="api"} show it; the change is logged as one line naming the
   token, the host, before -> after and the reason.
C: concurrency 1 on busy.test while 4 requests are in flight: those finish, and from then
   on the origin never sees more than 1 of its requests at once.
D: DELETE puts the host back (404 for a host without an override).
E: 10 000 overrides are listed in pages (limit=1000, after=...), each once (2 000 under
   the sanitizers: the same pages and paths, a tenth of TSan's minutes).
F: the overrides survive a restart (admin.state_file); a torn state file is refused at
   start with a clear log line and the proxy serves without it.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from control_api import api, config  # noqa: E402
from harness_bounds import overlap_peak  # noqa: E402


def test(t):
    origin = t.origin()
    port = origin.port
    cfg = config(t.workdir, concurrency=4, rate=100, burst=100, queue={"max_wait": "10s"},
                 adaptive={"enabled": False})
    cfg["hosts"] = {"short.test": {"queue": {"max_wait": "1s"}}}
    proxy = t.proxy(cfg)

    # A
    for token in (None, "wrong-token-0123456789"):
        status, headers, body = api(proxy, "PUT", "/api/hosts/paused.test/override", {"pause_for": "2s"}, token=token)
        H.check(status == 401 and "bearer" in headers.get("www-authenticate", "").lower(),
                "a write with token %r: %s %s" % (token, status, body))
    status, _, body = api(proxy, "GET", "/api/overrides")
    H.check(status == 200 and not [o for o in body["overrides"] if o["source"] == "api"],
            "a refused write changed something: %s" % body)
    status, _, body = api(proxy, "PUT", "/api/hosts/big.test/override", {"concurrency": 10})
    H.check(status == 400 and body.get("field") == "reason", "raising without a reason: %s %s" % (status, body))
    status, _, body = api(proxy, "PUT", "/api/hosts/big.test/override", {"rate": "fast"})
    H.check(status == 400 and body.get("field") == "rate", "a bad rate: %s %s" % (status, body))
    status, _, body = api(proxy, "PUT", "/api/hosts/big.test/override", "{not json")
    H.check(status == 400 and body.get("field") == "body", "not JSON: %s %s" % (status, body))
    for junk in ("*.test", "a%20b", "..", "x..test"):
        status, _, body = api(proxy, "PUT", "/api/hosts/%s/override" % junk, {"pause_for": "1s"})
        H.check(status == 400 and body.get("field") == "key", "a key %r: %s %s" % (junk, status, body))
    # One host, one key, however it is spelled.
    status, _, body = api(proxy, "PUT", "/api/hosts/127.1/override", {"concurrency": 1})
    H.check(status == 200 and body["key"] == "127.0.0.1", "an address spelled 127.1: %s %s" % (status, body))
    H.check(api(proxy, "DELETE", "/api/hosts/0x7f000001/override")[0] == 200, "the same address spelled in hex")

    # B
    status, _, body = api(proxy, "PUT", "/api/hosts/paused.test/override",
                          {"pause_for": "2s", "reason": "webmaster asked", "expires_in": "1h"})
    H.check(status == 200, "the pause: %s %s" % (status, body))
    t0 = time.monotonic()
    bg = H.Background(proxy, ["http://paused.test:%d/b?i=%d" % (port, i) for i in range(2)], timeout=30)
    status, _, body = api(proxy, "PUT", "/api/hosts/short.test/override", {"pause_for": "5s"})
    H.check(status == 200, "the pause of short.test: %s %s" % (status, body))
    late = H.request(proxy, "http://short.test:%d/b?late=1" % port, timeout=10)
    H.check(late.status == 503 and int(late.header("Retry-After") or 0) >= 3,
            "a request parked 1 s past queue.max_wait into a 5 s pause: %s %s" % (late.status, late.headers))
    H.check(origin.host("paused.test")["count"] == 0, "the origin saw paused.test during its pause")
    one = api(proxy, "GET", "/api/hosts/paused.test")[2]
    H.check(one.get("override_source") == "api" and one["override"]["reason"] == "webmaster asked",
            "/api/hosts/paused.test: %s" % one)
    hosts = proxy.hosts()
    H.check(hosts["paused.test"]["override_source"] == "api" and hosts["paused.test"]["paused_seconds"] > 0,
            "/hosts paused.test: %s" % hosts["paused.test"])
    m = proxy.metrics()
    H.check(H.mget(m, "politeproxy_host_override_info", host="paused.test", source="api",
                   reason="webmaster asked") == 1, "host_override_info{source=api}: %s"
            % H.mseries(m, "politeproxy_host_override_info"))
    results = bg.wait(30)
    H.check(all(r.status == 200 for r in results), "after the pause: %s" % H.summarize(results))
    first = min(r["start"] for r in origin.host("paused.test")["requests"])
    H.check(first - t0 >= 1.7, "paused.test reached the origin %.2fs after a 2s pause began" % (first - t0))
    logged = [line for line in proxy.lines if "override paused.test by alice" in line]
    H.check(len(logged) == 1 and "none -> " in logged[0] and "webmaster asked" in logged[0],
            "the change's log line: %s" % logged)

    # C
    bg = H.Background(proxy, ["http://busy.test:%d/c?delay=1&i=%d" % (port, i) for i in range(4)], timeout=30)
    H.wait_until(lambda: origin.host("busy.test")["in_flight"] == 4, 5)
    status, _, body = api(proxy, "PUT", "/api/hosts/busy.test/override", {"concurrency": 1, "reason": "asked"})
    t_cap = time.monotonic()
    H.check(status == 200, "concurrency 1: %s %s" % (status, body))
    more = H.Background(proxy, ["http://busy.test:%d/c2?delay=0.2&i=%d" % (port, i) for i in range(4)], timeout=30)
    results = bg.wait(30) + more.wait(30)
    H.check(all(r.status == 200 for r in results), "busy.test: %s" % H.summarize(results))
    after = [r for r in origin.host("busy.test")["requests"] if r["start"] >= t_cap]
    H.check(len(after) == 4 and overlap_peak(after) == 1,
            "busy.test after concurrency 1: %d requests, peak %d" % (len(after), overlap_peak(after)))

    # D
    status, _, body = api(proxy, "DELETE", "/api/hosts/busy.test/override")
    H.check(status == 200, "DELETE: %s %s" % (status, body))
    H.check(proxy.hosts()["busy.test"]["override_source"] is None and proxy.hosts()["busy.test"]["limit"] == 4,
            "busy.test after DELETE: %s" % proxy.hosts()["busy.test"])
    status, _, body = api(proxy, "DELETE", "/api/hosts/busy.test/override")
    H.check(status == 404, "a second DELETE: %s %s" % (status, body))

    # E
    t1 = time.monotonic()
    count = 10000 if H.SLOW == 1 else 2000
    for i in range(count):
        status, _, body = api(proxy, "PUT", "/api/hosts/h%05d.many.test/override" % i, {"concurrency": 1})
        if status != 200:
            H.check(False, "override %d: %s %s" % (i, status, body))
    H.log("%d overrides put in %.1fs" % (count, time.monotonic() - t1))
    seen, after, pages = [], None, 0
    while True:
        path = "/api/overrides?limit=1000" + ("&after=" + after if after else "")
        status, _, body = api(proxy, "GET", path)
        H.check(status == 200, "%s: %s" % (path, status))
        seen += [o["key"] for o in body["overrides"]]
        pages += 1
        after = body["next"]
        if after is None:
            break
        H.check(pages < 20, "paging does not end")
    many = [k for k in seen if k.endswith(".many.test")]
    H.check(len(many) == count and len(set(many)) == count and pages == count // 1000 + 1,
            "paged listing: %d keys (%d distinct) in %d pages" % (len(many), len(set(many)), pages))

    # F
    proxy.stop()
    again = t.proxy(cfg, name="restarted")
    status, _, body = api(again, "GET", "/api/overrides?limit=5&filter=paused")
    H.check(status == 200 and [o["key"] for o in body["overrides"]] == ["paused.test"],
            "/api/overrides?filter=paused after a restart: %s %s" % (status, body))
    kept = api(again, "GET", "/api/hosts/paused.test")[2]
    H.check(kept.get("override", {}).get("reason") == "webmaster asked", "after a restart: %s" % kept)
    H.check(api(again, "GET", "/api/hosts/h%05d.many.test" % (count - 1))[0] == 200,
            "the last of the %d after a restart" % count)
    again.stop()
    state = cfg["admin"]["state_file"]
    with open(state) as f:
        text = f.read()
    with open(state, "w") as f:
        f.write(text[:len(text) // 2])  # torn mid-write
    torn = t.proxy(cfg, name="torn")
    refused = [line for line in torn.lines if "state_file" in line and "refused" in line]
    H.check(refused, "a torn state file should be refused with a log line: %s" % torn.tail())
    H.check(api(torn, "GET", "/api/hosts/paused.test")[0] == 404, "the torn file's overrides were applied")
    r = H.request(torn, "http://fine.test:%d/f" % port)
    H.check(r.status == 200, "the proxy serves without its state file: %s" % r)


if __name__ == "__main__":
    H.main(test, timeout=120)
