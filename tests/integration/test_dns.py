#!/usr/bin/python3
"""Names and connections against a real DNS server on loopback (dnsmasq_server.py, zone
dns.test, records with a TTL of 3 s (8 s under the sanitizers), NXDOMAIN with the zone's SOA):
- a record's TTL is honoured: within it a new connection asks nobody and goes to the old
  address; after it, the next connection asks again and follows a changed address;
  /hosts shows the name's addresses and how long they hold;
- NXDOMAIN is answered 502 dns_error and cached for its negative TTL (no query within it);
- Happy Eyeballs: a name whose AAAA is ::1 on a closed port, and one whose ::1 drops
  connection attempts (a listener with a full backlog), with an A of 127.0.0.1 on a
  listening port: answered in under 400 ms (connection_attempt_delay 250 ms);
- a name with five addresses of which four are closed: answered;
- 1000 concurrent requests for one uncached name (the server hung for 0.4 s meanwhile): one query
  per type;
- key: ip with two names on one address: one gate;
- the server stopped: a cached name keeps working past its TTL (served stale, counted),
  a new name gets 502 dns_error at once."""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import dnsmasq_server  # noqa: E402

TTL = 3 if H.SLOW == 1 else 8  # the sanitizer builds' requests are slower: a TTL to test within


def proxy_config(dns, **defaults):
    cfg = H.base_config(**defaults)
    cfg["resolve"] = {}  # every name from DNS
    cfg["security"]["allow_destinations"] = ["127.0.0.0/8", "::1/128"]
    cfg["dns"] = {"servers": [dns.server], "min_ttl": "1s", "stale_for": "30s", "connection_attempt_delay": "250ms"}
    return cfg


def dns_error(r):
    return r.status == 502 and "dns_error" in (r.header("Proxy-Status") or "")


def tarpit(port):
    """A listener on [::1]:port that never accepts, its backlog full: further connection
    attempts get no answer (their SYNs are dropped) until it closes."""
    listener = socket.socket(socket.AF_INET6)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("::1", port))
    listener.listen(0)
    fillers = []
    for _ in range(8):
        c = socket.socket(socket.AF_INET6)
        c.setblocking(False)
        c.connect_ex(("::1", port))
        fillers.append(c)
    time.sleep(0.1)
    probe = socket.socket(socket.AF_INET6)
    probe.settimeout(0.5)
    try:
        probe.connect(("::1", port))
        hangs = False
    except (socket.timeout, TimeoutError):
        hangs = True
    except OSError:
        hangs = False
    probe.close()
    return listener, fillers, hangs


def phase_ttl_and_negative(t, dns, p, o1, o2):
    name, url = "ttl.dns.test", "http://ttl.dns.test:%d/?header=Connection:close" % o1.port
    nx_url = "http://nx.dns.test:%d/" % o1.port
    c0, n0 = dns.query_count(name), dns.query_count("nx.dns.test")
    r = H.request(p, url)
    looked_up = time.monotonic()
    H.check(r.status == 200, "first request: %s" % r)
    H.check(dns.query_count(name) == c0 + 2, "the first request asked %d queries, expected A and AAAA"
            % (dns.query_count(name) - c0))
    seen = p.hosts().get(name, {})
    H.check(seen.get("addresses") == ["127.0.0.1"] and 0 < seen.get("addresses_ttl_seconds", 0) <= TTL,
            "/hosts does not show the name's address and TTL: %r" % {k: seen.get(k) for k in ("addresses", "addresses_ttl_seconds")})
    r = H.request(p, nx_url)
    H.check(dns_error(r), "an unknown name: %s (%s), expected 502 dns_error" % (r.status, r.header("Proxy-Status")))
    H.check(dns.query_count("nx.dns.test") == n0 + 2, "NXDOMAIN: %d queries" % (dns.query_count("nx.dns.test") - n0))
    # The record changes; within its TTL the proxy neither asks nor follows.
    dns.set_records(dict(RECORDS, **{name: ["127.0.0.2"]}))
    dns.wait_for(name, ["127.0.0.2"])
    c1 = dns.query_count(name)
    r = H.request(p, url)
    r_nx = H.request(p, nx_url)
    H.check(time.monotonic() - looked_up < TTL, "too slow to test within the TTL")
    H.check(r.status == 200 and o1.host(name)["count"] == 2 and o2.host(name)["count"] == 0,
            "within the TTL the request went elsewhere: %s, old %d new %d"
            % (r, o1.host(name)["count"], o2.host(name)["count"]))
    H.check(dns.query_count(name) == c1, "within the TTL the proxy asked again")
    H.check(dns_error(r_nx) and dns.query_count("nx.dns.test") == n0 + 2,
            "NXDOMAIN within its negative TTL: asked %d more" % (dns.query_count("nx.dns.test") - n0 - 2))
    time.sleep(max(0, looked_up + TTL + 0.3 - time.monotonic()))
    r = H.request(p, url)
    H.check(r.status == 200 and o2.host(name)["count"] == 1, "after the TTL the request did not follow the change: %s" % r)
    H.check(dns.query_count(name) == c1 + 2, "after the TTL: %d queries" % (dns.query_count(name) - c1))
    H.request(p, nx_url)
    H.check(dns.query_count("nx.dns.test") == n0 + 4, "NXDOMAIN after its negative TTL was not asked again")
    H.log("TTL %d s honoured and followed; NXDOMAIN cached for its negative TTL" % TTL)


def phase_happy_eyeballs(t, p, o1):
    # ::1 refuses at once.
    start = time.monotonic()
    r = H.request(p, "http://closed6.dns.test:%d/" % o1.port)
    took = time.monotonic() - start
    H.check(r.status == 200 and took < 0.4 * H.SLOW, "AAAA ::1 closed, A 127.0.0.1 open: %s in %.3f s" % (r.status, took))
    H.log("::1 closed port, 127.0.0.1 listening: 200 in %.3f s" % took)
    # ::1 drops the attempt: the next address after connection_attempt_delay.
    o3 = t.origin()
    listener, fillers, hangs = tarpit(o3.port)
    try:
        if not hangs:
            H.log("note: a full backlog on ::1 does not drop connection attempts here; the black hole part is skipped")
            return
        start = time.monotonic()
        r = H.request(p, "http://hole6.dns.test:%d/" % o3.port)
        took = time.monotonic() - start
        H.check(r.status == 200 and 0.2 <= took < 0.4 * H.SLOW,
                "AAAA ::1 dropping attempts, A 127.0.0.1 open: %s in %.3f s (expected 0.25 s)" % (r.status, took))
        H.log("::1 dropping connection attempts, 127.0.0.1 listening: 200 in %.3f s" % took)
        m = H.parse_metrics(p.metrics_text())
        H.check(H.mget(m, "politeproxy_connect_attempts_total", family="ipv6", result="abandoned") >= 1,
                "the attempt to ::1 was not counted as abandoned")
    finally:
        for c in fillers:
            c.close()
        listener.close()


def phase_five_addresses(p, o1):
    r = H.request(p, "http://five.dns.test:%d/" % o1.port)
    H.check(r.status == 200, "five addresses, four closed: %s" % r)


def phase_one_query(dns, p, o1):
    name = "crowd.dns.test"
    c0 = dns.query_count(name)
    dns.pause()
    threading.Timer(0.4, dns.resume).start()  # well within c-ares's first try (1 s): no resend
    results = H.concurrent(p, ["http://%s:%d/?i=%d" % (name, o1.port, i) for i in range(1000)], timeout=30)
    bad = [r for r in results if r.status != 200]
    H.check(not bad, "%d of 1000 requests failed: %s" % (len(bad), bad[:3]))
    H.check(dns.query_count(name) - c0 == 2, "1000 concurrent requests for one name asked %d queries, expected 2 "
            "(A and AAAA)" % (dns.query_count(name) - c0))
    H.log("1000 concurrent requests for one uncached name: one query per type")


def phase_ip_key(t, dns, o1):
    p = t.proxy(proxy_config(dns, concurrency=1, key="ip"), name="ip-key")
    urls = ["http://%s:%d/?delay=0.1&tag=ipkey&i=%d" % (n, o1.port, i) for n in ("two-a.dns.test", "two-b.dns.test")
            for i in range(3)]
    results = H.concurrent(p, urls, timeout=30)
    H.check(all(r.status == 200 for r in results), "key: ip: %s" % [r.status for r in results])
    keys = set(p.hosts())
    H.check("127.0.0.1" in keys and not keys & {"two-a.dns.test", "two-b.dns.test"},
            "key: ip: two names on one address are not one gate: %s" % sorted(keys))
    records = [r for n in ("two-a.dns.test", "two-b.dns.test") for r in o1.host(n)["requests"] if "tag=ipkey" in r["target"]]
    H.check(H.overlap_peak(records) == 1, "key: ip, concurrency 1: %d at once across both names" % H.overlap_peak(records))
    p.stop()


def phase_server_stopped(dns, p, o1):
    r = H.request(p, "http://stale.dns.test:%d/?header=Connection:close" % o1.port)
    cached_at = time.monotonic()
    H.check(r.status == 200, "stale.dns.test: %s" % r)
    dns.stop()
    time.sleep(max(0, cached_at + TTL + 0.3 - time.monotonic()))
    r = H.request(p, "http://stale.dns.test:%d/?header=Connection:close" % o1.port)
    H.check(r.status == 200, "a cached name past its TTL with the server stopped: %s" % r)
    start = time.monotonic()
    r = H.request(p, "http://new.dns.test:%d/" % o1.port)
    took = time.monotonic() - start
    H.check(dns_error(r) and took < 2.5 * H.SLOW, "a new name with the server stopped: %s in %.2f s" % (r.status, took))
    m = H.parse_metrics(p.metrics_text())
    H.check(H.mget(m, "politeproxy_dns_queries_total", result="stale") >= 1, "no stale answer counted")
    H.check(H.mget(m, "politeproxy_dns_cache_entries") >= 1, "dns_cache_entries is 0")
    H.log("server stopped: cached name served stale; a new name 502 dns_error in %.2f s" % took)


RECORDS = {
    "ttl.dns.test": ["127.0.0.1"],
    "closed6.dns.test": ["::1", "127.0.0.1"],
    "hole6.dns.test": ["::1", "127.0.0.1"],
    "five.dns.test": ["127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.1"],
    "crowd.dns.test": ["127.0.0.1"],
    "two-a.dns.test": ["127.0.0.1"],
    "two-b.dns.test": ["127.0.0.1"],
    "stale.dns.test": ["127.0.0.1"],
}


def test(t):
    if not dnsmasq_server.available():
        H.log("SKIP: dnsmasq is not installed (Debian: dnsmasq-base)")
        return
    dns = t.dns(ttl=TTL)
    dns.set_records(RECORDS)
    dns.wait_for("stale.dns.test", ["127.0.0.1"])
    o1 = t.origin()
    o2 = t.origin(address="127.0.0.2", port=o1.port)
    # five.dns.test's closed addresses: nothing listens on them at o1's port.
    p = t.proxy(proxy_config(dns, concurrency=2))
    # The crowd's proxy keeps an answer 60 s: 1000 requests take longer than the TTL of 3 s.
    crowd_cfg = proxy_config(dns, concurrency=1000, queue={"max_waiting": 2000})
    crowd_cfg["dns"]["min_ttl"] = "60s"
    p_crowd = t.proxy(crowd_cfg, name="crowd")
    phase_ttl_and_negative(t, dns, p, o1, o2)
    phase_happy_eyeballs(t, p, o1)
    phase_five_addresses(p, o1)
    phase_one_query(dns, p_crowd, o1)
    phase_ip_key(t, dns, o1)
    phase_server_stopped(dns, p, o1)


if __name__ == "__main__":
    H.main(test, timeout=120)
