// host_gates' passes over every tracked host in slices (eviction, a reload), each slice
// one shard's lock over a few of its slots: a million hosts never hold a loop long.
// Sans-io: a manual_time, no loop.
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/base/manual_time.hpp"
#include "host_gates_testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>

using namespace politeproxy;
using namespace politeproxy::testing;
using namespace std::chrono_literals;

TEST_CASE("an eviction pass in slices: each holds one shard's lock over a few slots, the pass forgets every idle gate") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    constexpr std::size_t hosts = 20000;
    for (std::size_t i = 0; i < hosts; ++i) CHECK(gates.try_acquire("h" + std::to_string(i) + ".test"));
    permit kept = gates.try_acquire("busy.test");
    REQUIRE(kept);
    time.advance(1h);
    std::size_t evicted = 0, slices = 0;
    std::set<std::size_t> shards_seen;
    for (host_table::pass_cursor at; !at.done(); ++slices) {
        const std::size_t shard = at.shard;
        const std::size_t n = gates.evict_idle(at, time.now(), 1min, {}, {}, 64);
        CHECK((at.done() || at.shard == shard || at.shard == shard + 1));  // one shard per slice
        shards_seen.insert(shard);
        evicted += n;
    }
    CHECK(evicted == hosts);
    CHECK(gates.size() == 1);  // busy.test is kept
    CHECK(shards_seen.size() == host_table::shard_count);
    // 20000 hosts over 16 shards, each of over 1600 slots (live entries fill at most 3/4
    // of them), 64 slots a slice: over 26 slices a shard.
    CHECK(slices >= 26 * host_table::shard_count);
}

TEST_CASE("a reload in slices: new entries take the new config at once, tracked ones as the pass reaches them") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    constexpr std::size_t hosts = 5000;
    for (std::size_t i = 0; i < hosts; ++i) CHECK(gates.try_acquire("h" + std::to_string(i) + ".test"));
    const auto limits = [&] {
        std::map<std::size_t, std::size_t> by_limit;
        for (const auto& h : gates.snapshot(time.now())) ++by_limit[h.configured_limit];
        return by_limit;
    };
    gates.begin_config(make_config("defaults: { concurrency: 3, rate: 1000, burst: 1 }\n"));
    CHECK(gates.try_acquire("new.test"));  // made from the new config
    CHECK(gates.snapshot(time.now()).size() == hosts + 1);
    host_table::pass_cursor at;
    gates.reapply_config(at, 16);
    const auto partway = limits();
    CHECK(partway.at(1) > hosts / 2);  // most are not reached yet
    CHECK(partway.at(3) >= 2);         // the new entry, and those of the first slice
    // More hosts mid-pass: every shard's table grows (its slots laid out again, entries
    // moved behind the cursor too); the pass still reaches every one.
    for (std::size_t i = 0; i < hosts; ++i) CHECK(gates.try_acquire("later" + std::to_string(i) + ".test"));
    std::size_t slices = 1;
    for (; !at.done(); ++slices) gates.reapply_config(at, 16);
    CHECK(slices > host_table::shard_count);
    CHECK(limits() == std::map<std::size_t, std::size_t>{{3, 2 * hosts + 1}});
}

TEST_CASE("a reload pass goes on through a shard an eviction pass shrank under it, and reaches every entry left") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    std::vector<permit> busy;  // held: never idle, never evicted
    for (std::size_t i = 0; i < 8000; ++i) {
        permit p = gates.try_acquire("h" + std::to_string(i) + ".test");
        REQUIRE(p);
        if (i % 40 == 0) busy.push_back(std::move(p));
    }
    gates.begin_config(make_config("defaults: { concurrency: 3, rate: 1000, burst: 1 }\n"));
    host_table::pass_cursor reload;
    for (int i = 0; i < 12; ++i) gates.reapply_config(reload, 16);  // partway through the first shard
    REQUIRE(reload.shard == 0);
    REQUIRE(reload.slot > 0);
    time.advance(1h);
    for (host_table::pass_cursor at; !at.done();) gates.evict_idle(at, time.now(), 1min, {}, {});
    REQUIRE(gates.size() == busy.size());  // each shard now under 1/8 full: its slots shrank, laid out anew
    while (!reload.done()) gates.reapply_config(reload, 16);
    for (const auto& h : gates.snapshot(time.now())) CHECK_MESSAGE(h.configured_limit == 3, h.key);
}

TEST_CASE("a scrape's rows: every tracked host's counters as its snapshot has them; snapshots of the named keys alone") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    for (int i = 0; i < 300; ++i) {
        permit p = gates.try_acquire("h" + std::to_string(i % 100) + ".test");
        if (!p) continue;  // the slot or the token of this host is taken
        p.set_outcome(i % 3 == 0 ? outcome::throttled : outcome::ok);
        time.advance(5ms);
    }
    permit held = gates.try_acquire("held.test");
    REQUIRE(held);
    const auto rows = gates.series_rows();
    const auto snapshots = gates.snapshot(time.now());
    REQUIRE(rows.size() == snapshots.size());
    CHECK(rows.size() == 101);
    std::map<std::string, const host_snapshot*> by_key;
    for (const auto& h : snapshots) by_key[h.key] = &h;
    for (const auto& r : rows) {
        REQUIRE(by_key.contains(r.key));
        const host_snapshot& h = *by_key.at(r.key);
        CHECK(r.in_flight == h.in_flight);
        CHECK(r.waiting == h.waiting);
        CHECK(r.outcomes == h.outcomes);
        CHECK(r.limit_changes == h.limit_changes);
        CHECK(r.would_have_waited == h.would_have_waited);
        CHECK(r.enforce == h.enforce);
    }
    CHECK(by_key.at("held.test")->in_flight == 1);
    CHECK(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.outcomes != decltype(r.outcomes){}; }) == 100);

    const auto named = gates.snapshot({"h7.test", "never.test", "held.test"}, time.now());
    REQUIRE(named.size() == 2);  // an untracked key is left out; the rest in the order asked
    CHECK(named[0].key == "h7.test");
    CHECK(named[0].outcomes == by_key.at("h7.test")->outcomes);
    CHECK(named[1].key == "held.test");
    CHECK(named[1].in_flight == 1);
}

TEST_CASE("rows and snapshots read in slices while hosts come and grow the shards: each host once, every one there before") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    for (int i = 0; i < 2000; ++i) CHECK(gates.try_acquire("old" + std::to_string(i) + ".test"));
    std::atomic<bool> adding{true};
    std::thread newcomers([&] {  // each shard laid out anew several times (growth)
        for (int i = 0; i < 60000; ++i) gates.try_acquire("new" + std::to_string(i) + ".test");
        adding = false;
    });
    int reads = 0;
    do {
        const auto rows = gates.series_rows(16);
        std::set<std::string> keys;
        for (const auto& r : rows) CHECK(keys.insert(r.key).second);  // no host twice
        for (int i = 0; i < 2000; i += 97) CHECK(keys.contains("old" + std::to_string(i) + ".test"));
        if (reads % 4 == 0) {  // /hosts reads its snapshots in slices the same way (of row_slice)
            std::set<std::string> snapped;
            for (const auto& h : gates.snapshot(time.now())) CHECK(snapped.insert(h.key).second);
            CHECK(snapped.contains("old0.test"));
        }
        ++reads;
    } while (adding);
    newcomers.join();
    MESSAGE(reads << " reads while hosts came");
    CHECK(gates.series_rows(16).size() == 62000);
}

TEST_CASE("an eviction pass takes at most a tenth of the TTL, or one tick: a few shards a tick when it is long") {
    using namespace std::chrono_literals;
    const auto per_tick = [](clock::duration ttl) { return host_gates::eviction_shards_per_tick(ttl, 1s); };
    CHECK(per_tick(5s) == host_table::shard_count);   // a tenth is under a tick: every shard every tick
    CHECK(per_tick(10s) == host_table::shard_count);  // a tenth is a tick
    CHECK(per_tick(30s) == 6);                        // 16 shards in 3 s: 5.3 a tick, a pass in 3 ticks
    CHECK(per_tick(60s) == 3);                        // the default TTL: a pass in 6 ticks
    CHECK(per_tick(10min) == 1);                      // a pass in 16 ticks
    CHECK(per_tick(12s) == 14);                       // test_host_eviction's: a pass in 2 ticks
    CHECK(per_tick(24h) == 1);
    CHECK(per_tick(0s) == host_table::shard_count);
    CHECK(host_gates::eviction_shards_per_tick(60s, 0s) == host_table::shard_count);
}
