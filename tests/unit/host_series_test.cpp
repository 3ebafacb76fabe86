// Who keeps a per-host series under metrics.max_host_series: names never flap, free
// places go to the busiest, and "_other"'s counters never go back.
#include "politeproxy/admin/series_cap.hpp"

#include <doctest/doctest.h>

#include <map>
#include <numeric>
#include <random>

using namespace politeproxy;

namespace {

host_series_row host(const std::string& key, std::uint64_t ok, std::size_t in_flight = 0) {
    host_series_row h;
    h.key = key;
    h.outcomes[0] = ok;
    h.in_flight = in_flight;
    return h;
}

std::uint64_t total(const host_series_row& h) { return std::accumulate(h.outcomes.begin(), h.outcomes.end(), std::uint64_t{0}); }

std::vector<std::string> named(const std::vector<host_series_row>& hosts, const host_series::picked& p) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < hosts.size(); ++i)
        if (p.named[i]) out.push_back(hosts[i].key);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("the busiest hosts get the places; the rest are summed under _other") {
    host_series s;
    std::vector<host_series_row> hosts{host("c.test", 1, 3), host("a.test", 10), host("b.test", 5)};
    auto p = s.pick(hosts, 2);
    CHECK(named(hosts, p) == std::vector<std::string>{"a.test", "b.test"});
    REQUIRE(p.has_other);
    CHECK(p.other.key == "_other");
    CHECK(total(p.other) == 1);
    CHECK(p.other.in_flight == 3);

    SUBCASE("no cap reached: no _other") {
        host_series wide;
        p = wide.pick(hosts, 10);
        CHECK(named(hosts, p).size() == 3);
        CHECK_FALSE(p.has_other);
    }
}

TEST_CASE("a named host keeps its series while it has state, however busy the others get") {
    host_series s;
    std::vector<host_series_row> hosts{host("a.test", 10), host("b.test", 5), host("c.test", 1)};
    s.pick(hosts, 2);
    hosts[2].outcomes[0] = 1000;  // c becomes the busiest
    auto p = s.pick(hosts, 2);
    CHECK(named(hosts, p) == std::vector<std::string>{"a.test", "b.test"});
    CHECK(total(p.other) == 1000);

    // b is evicted: its place goes to c, whose count so far stays in _other.
    s.evicted("b.test", host_counts::of(hosts[1]));
    hosts.erase(hosts.begin() + 1);
    hosts[1].outcomes[0] = 1200;
    p = s.pick(hosts, 2);
    CHECK(named(hosts, p) == std::vector<std::string>{"a.test", "c.test"});
    REQUIRE(p.has_other);
    CHECK(total(p.other) == 1200);  // never back: c's count stays where it was counted
}

TEST_CASE("a host evicted without a series of its own stays counted in _other") {
    host_series s;
    std::vector<host_series_row> hosts{host("a.test", 10), host("b.test", 4)};
    auto p = s.pick(hosts, 1);
    CHECK(total(p.other) == 4);
    s.evicted("b.test", host_counts::of(host("b.test", 6)));  // 2 more since the scrape
    s.evicted("never-scraped.test", host_counts::of(host("never-scraped.test", 3)));
    hosts.pop_back();
    p = s.pick(hosts, 1);
    CHECK(named(hosts, p) == std::vector<std::string>{"a.test"});
    REQUIRE(p.has_other);
    CHECK(total(p.other) == 9);
}

TEST_CASE("a host evicted between the snapshot and the pick is not counted twice") {
    host_series s;
    std::vector<host_series_row> hosts{host("a.test", 10), host("b.test", 4), host("c.test", 50)};
    auto p = s.pick(hosts, 1);
    REQUIRE(named(hosts, p) == std::vector<std::string>{"c.test"});
    CHECK(total(p.other) == 14);
    // The next scrape's snapshot still has b and c; both are evicted before the pick.
    s.begin_scrape();
    s.evicted("b.test", host_counts::of(host("b.test", 5)));
    s.evicted("c.test", host_counts::of(host("c.test", 60)));
    hosts[1].outcomes[0] = 5;
    hosts[2].outcomes[0] = 60;
    p = s.pick(hosts, 1);
    CHECK(named(hosts, p) == std::vector<std::string>{"a.test"});  // c's place, and b is not in _other twice
    const auto raced = total(p.other);
    CHECK(raced == 10 + 5);  // a's count carried on its promotion, b's final count carried at eviction
    hosts.erase(hosts.begin() + 1, hosts.end());
    p = s.pick(hosts, 1);
    CHECK(total(p.other) == raced);  // never back
}

TEST_CASE("over many scrapes with evictions and growth, _other never goes back and names never flap") {
    std::mt19937 random(7);
    host_series s;
    std::map<std::string, std::uint64_t> live;  // host -> requests so far
    std::map<std::string, bool> was_named;
    std::uint64_t last_other = 0;
    const std::size_t cap = 5;
    for (int scrape = 0; scrape < 300; ++scrape) {
        // New hosts, growth, evictions.
        live["h" + std::to_string(random() % 40) + ".test"] += 0;
        for (auto& [key, n] : live) n += random() % 5;
        for (auto it = live.begin(); it != live.end();) {
            if (random() % 10 == 0) {
                s.evicted(it->first, host_counts::of(host(it->first, it->second)));
                was_named.erase(it->first);
                it = live.erase(it);
            } else {
                ++it;
            }
        }
        std::vector<host_series_row> hosts;
        for (const auto& [key, n] : live) hosts.push_back(host(key, n));
        const auto p = s.pick(hosts, cap);
        const auto names = named(hosts, p);
        CHECK(names.size() <= cap);
        CHECK(names.size() == std::min(cap, hosts.size()));
        for (const auto& [key, named_before] : was_named)
            if (named_before) CHECK(std::find(names.begin(), names.end(), key) != names.end());
        for (const auto& h : hosts) was_named[h.key] = std::find(names.begin(), names.end(), h.key) != names.end();
        const std::uint64_t other = p.has_other ? total(p.other) : 0;
        CHECK(other >= last_other);
        last_other = other;
    }
}
