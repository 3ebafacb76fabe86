// The cache of names, with the time passed in: TTLs clamped, negative answers, serve
// stale after a failed refresh, the least recently used name evicted, connect order.
#include "politeproxy/policy/dns_cache.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono_literals;
using kind = dns_cache::hit::kind;

namespace {

ip_bytes v4(std::uint8_t last) { return ipv4_bytes(0x7f000000u | last); }

ip_bytes v6(std::uint8_t last) {
    ip_bytes b{};
    b[0] = 0x20;
    b[1] = 0x01;
    b[15] = last;
    return b;
}

dns_answer found(std::vector<ip_bytes> six, std::vector<ip_bytes> four, clock::duration ttl) {
    return {dns_answer::outcome::found, std::move(six), std::move(four), ttl};
}

dns_answer nxdomain(clock::duration ttl) { return {dns_answer::outcome::no_such_name, {}, {}, ttl}; }

const dns_answer failed{};

dns_cache::settings limits(std::size_t names = 100) { return {5s, 1h, 30s, 5min, names}; }

}  // namespace

TEST_CASE("an answer is kept for its TTL, clamped to [min_ttl, max_ttl]") {
    dns_cache cache(limits());
    const clock::time_point t0{};
    CHECK(cache.find("a.test", t0).what == kind::miss);
    auto h = cache.store("a.test", found({}, {v4(1)}, 60s), t0);
    CHECK(h.what == kind::fresh);
    CHECK(h.expires == t0 + 60s);
    CHECK(cache.find("a.test", t0 + 59s).what == kind::fresh);
    CHECK(cache.find("a.test", t0 + 60s).what == kind::expired);  // the next request refreshes it
    CHECK(cache.store("short.test", found({}, {v4(2)}, 1s), t0).expires == t0 + 5s);
    CHECK(cache.store("long.test", found({}, {v4(3)}, 48h), t0).expires == t0 + 1h);
    // With min_ttl 0, a TTL of 0: used by the requests that waited for it, kept for none.
    dns_cache none(dns_cache::settings{0s, 1h, 30s, 5min, 100});
    CHECK(none.store("zero.test", found({}, {v4(4)}, 0s), t0).what == kind::fresh);
    CHECK(none.find("zero.test", t0).what == kind::expired);
    // A refresh with a new address replaces the old.
    h = cache.store("a.test", found({}, {v4(9)}, 60s), t0 + 61s);
    REQUIRE(h.addresses.size() == 1);
    CHECK(h.addresses[0] == v4(9));
}

TEST_CASE("a name that does not exist is kept for its negative TTL, capped by negative_ttl") {
    dns_cache cache(limits());
    const clock::time_point t0{};
    CHECK(cache.store("gone.test", nxdomain(10s), t0).what == kind::negative);
    CHECK(cache.find("gone.test", t0 + 9s).what == kind::negative);
    CHECK(cache.find("gone.test", t0 + 10s).what == kind::miss);
    CHECK(cache.store("gone.test", nxdomain(1h), t0).expires == t0 + 30s);
    // No SOA: not kept at all, and a name that was there is forgotten.
    cache.store("was.test", found({}, {v4(1)}, 60s), t0);
    CHECK(cache.store("was.test", nxdomain(0s), t0 + 61s).what == kind::negative);
    CHECK(cache.find("was.test", t0 + 61s).what == kind::miss);
    CHECK(cache.size() == 1);  // gone.test
    // An answer with no address of either family is no such name.
    CHECK(cache.store("empty.test", found({}, {}, 60s), t0).what == kind::negative);
}

TEST_CASE("a failed refresh serves the old addresses for stale_for, rechecking every 5 s") {
    dns_cache cache(limits());
    const clock::time_point t0{};
    cache.store("s.test", found({}, {v4(1)}, 60s), t0);
    // Failed before it expired: still fresh.
    CHECK(cache.store("s.test", failed, t0 + 30s).what == kind::fresh);
    // Failed after: stale, and not asked again before the recheck.
    auto h = cache.store("s.test", failed, t0 + 61s);
    CHECK(h.what == kind::stale);
    REQUIRE(h.addresses.size() == 1);
    CHECK(cache.find("s.test", t0 + 65s).what == kind::stale);
    CHECK(cache.find("s.test", t0 + 66s).what == kind::expired);  // time to ask again
    CHECK(cache.store("s.test", failed, t0 + 66s).what == kind::stale);
    // stale_for after expiry: nothing to serve.
    CHECK(cache.store("s.test", failed, t0 + 60s + 5min).what == kind::miss);
    CHECK(cache.find("s.test", t0 + 60s + 5min).what == kind::miss);
    // A name never resolved: a failure is a miss.
    CHECK(cache.store("never.test", failed, t0).what == kind::miss);
    CHECK(cache.size() == 1);
    // A name that does not exist is never served stale.
    cache.store("nx.test", nxdomain(10s), t0);
    CHECK(cache.store("nx.test", failed, t0 + 11s).what == kind::miss);
}

TEST_CASE("at most max_names: the least recently used goes first") {
    dns_cache cache(limits(3));
    const clock::time_point t0{};
    for (std::uint8_t i = 1; i <= 3; ++i) cache.store("n" + std::to_string(i) + ".test", found({}, {v4(i)}, 60s), t0);
    CHECK(cache.find("n1.test", t0).what == kind::fresh);  // n2 is now the least recently used
    cache.store("n4.test", found({}, {v4(4)}, 60s), t0);
    CHECK(cache.size() == 3);
    CHECK(cache.peek("n2.test", t0).what == kind::miss);
    CHECK(cache.peek("n1.test", t0).what == kind::fresh);
    CHECK(cache.peek("n3.test", t0).what == kind::fresh);
    // peek does not count as a use: n3 goes next.
    cache.store("n5.test", found({}, {v4(5)}, 60s), t0);
    CHECK(cache.peek("n3.test", t0).what == kind::miss);
}

TEST_CASE("addresses in connect order: IPv6 first, the families alternating") {
    dns_cache cache(limits());
    const auto h = cache.store("both.test", found({v6(1), v6(2)}, {v4(1), v4(2), v4(3), v4(4)}, 60s), clock::time_point{});
    const std::vector<ip_bytes> order(h.addresses.begin(), h.addresses.end());
    CHECK(order == std::vector<ip_bytes>{v6(1), v4(1), v6(2), v4(2), v4(3), v4(4)});
    CHECK(is_ipv4(v4(1)));
    CHECK_FALSE(is_ipv4(v6(1)));
}
