// The lease protocol's store half: the real Lua scripts in a real redis-server.
#include "politeproxy/fleet/lease_scripts.hpp"
#include "redis_server.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace politeproxy::fleet;
using politeproxy::testing::redis_server;

namespace {

struct acquired {
    bool granted;
    long long held, limit, rate_micro, pause_ms, wait_ms;
};

// One host's view of the store, with one process's tag.
struct host_view {
    redis_server& store;
    host_keys keys;
    std::string tag;

    acquired acquire(const std::string& member, long long ttl_ms, long long limit, double rate = 1000,
                     double burst = 1000) {
        const auto& s = acquire_script();
        const auto r = batch({}, {member}, ttl_ms, limit, rate, burst);
        return {r.granted == 1, r.held, r.limit, r.rate_micro, r.pause_ms, r.wait_ms};
    }
    struct batch_reply {
        long long granted, held, limit, rate_micro, pause_ms, wait_ms, spares;
    };
    // One command: `given` back (and `refund_ms` of unused spare tokens), then `wanted`
    // asked for with `spares` spare tokens each (what fleet_client sends).
    batch_reply batch(const std::vector<std::string>& given, const std::vector<std::string>& wanted, long long ttl_ms,
                      long long limit, double rate = 1000, double burst = 1000, int spares = 0, double refund_ms = 0) {
        const auto& s = acquire_script();
        std::vector<std::string> args{"EVAL", s.body, std::to_string(4 + given.size()), keys.leases, keys.state,
                                      keys.waiters, keys.polled};
        for (std::size_t i = 0; i < given.size(); ++i) args.push_back(keys.leases);
        args.insert(args.end(), {std::to_string(ttl_ms), std::to_string(limit), std::to_string(rate),
                                 std::to_string(burst), "120000", tag, "500", std::to_string(spares),
                                 std::to_string(refund_ms)});
        args.insert(args.end(), given.begin(), given.end());
        args.insert(args.end(), wanted.begin(), wanted.end());
        auto r = store.command(args);
        REQUIRE(r->type == REDIS_REPLY_ARRAY);
        REQUIRE(r->elements == 7);
        auto at = [&](int i) { return r->element[i]->integer; };
        return {at(0), at(1), at(2), at(3), at(4), at(5), at(6)};
    }
    long long held() { return store.command({"ZCOUNT", keys.leases, "1", "+inf"})->integer; }
    // What fleet_client sends for a release no acquire carried; the leases then held.
    long long release(const std::string& member) {
        store.command({"EVAL", release_script().body, "1", keys.leases, "1", member});
        return store.command({"ZCOUNT", keys.leases, "1", "+inf"})->integer;
    }
    std::pair<long long, long long> renew(long long ttl_ms, std::vector<std::string> members) {
        std::vector<std::string> args{"EVAL", renew_script().body, "1", keys.leases, std::to_string(ttl_ms)};
        args.insert(args.end(), members.begin(), members.end());
        auto r = store.command(args);
        return {r->element[0]->integer, r->element[1]->integer};
    }
    void publish(long long limit, double rate, long long pause_ms) {
        store.command({"EVAL", publish_script().body, "1", keys.state, std::to_string(limit), std::to_string(rate),
                       std::to_string(pause_ms), "120000"});
    }
    host_view as(std::string other_tag) const { return {store, keys, std::move(other_tag)}; }
};

}  // namespace

TEST_CASE("the fleet bound: leases up to the limit, refused beyond, freed by release") {
    redis_server store;
    host_view h{store, host_keys("bound.example"), "p1"};
    CHECK(h.acquire("p1:1", 30000, 2).granted);
    const auto second = h.acquire("p1:2", 30000, 2);
    CHECK(second.granted);
    CHECK(second.held == 2);
    const auto third = h.acquire("p1:3", 30000, 2);
    CHECK_FALSE(third.granted);
    CHECK(third.held == 2);
    CHECK(third.pause_ms == 0);
    CHECK(third.wait_ms == 0);  // waiting for a lease, not for a token
    CHECK(h.release("p1:1") == 1);
    CHECK(h.acquire("p1:3", 30000, 2).granted);
}

TEST_CASE("a lease's expiry is the store's TIME plus the TTL: no proxy clock is involved") {
    redis_server store;
    host_view h{store, host_keys("clock.example"), "p1"};
    const auto before = store.now_ms();
    REQUIRE(h.acquire("p1:1", 30000, 1).granted);
    const auto after = store.now_ms();
    auto score = store.command({"ZSCORE", h.keys.leases, "p1:1"});
    const auto expiry = std::stoll(score->str);
    CHECK(expiry >= before + 30000);
    CHECK(expiry <= after + 30000);

    // Expired is judged on the store's clock alone: a lease whose expiry the store's TIME
    // has passed is purged at the next acquire; one a minute ahead is kept.
    store.command({"ZADD", h.keys.leases, std::to_string(store.now_ms() - 1), "p1:1"});
    store.command({"ZADD", h.keys.leases, std::to_string(store.now_ms() + 60000), "crashed:1"});
    const auto next = h.acquire("p1:2", 30000, 2);
    CHECK(next.granted);
    CHECK(next.held == 2);  // crashed:1 and p1:2; p1:1 is gone
    CHECK_FALSE(store.command({"ZSCORE", h.keys.leases, "p1:1"})->str);
}

TEST_CASE("a crashed process's lease comes back when its TTL passes on the store's clock") {
    redis_server store;
    host_view h{store, host_keys("crash.example"), "p1"};
    REQUIRE(h.acquire("dead:1", 50, 1).granted);  // 50 ms, never renewed
    CHECK_FALSE(h.acquire("p1:1", 30000, 1).granted);
    const auto until = store.now_ms() + 50;
    while (store.now_ms() <= until) {
    }  // the store's clock, not ours
    CHECK(h.acquire("p1:1", 30000, 1).granted);
}

TEST_CASE("renewal extends held leases and re-asserts lost ones, counting them") {
    redis_server store;
    host_view h{store, host_keys("renew.example"), "p1"};
    REQUIRE(h.acquire("p1:1", 1000, 3).granted);
    REQUIRE(h.acquire("p1:2", 1000, 3).granted);
    const auto [lost, held] = h.renew(60000, {"p1:1", "p1:2"});
    CHECK(lost == 0);
    CHECK(held == 2);
    CHECK(std::stoll(store.command({"ZSCORE", h.keys.leases, "p1:1"})->str) >= store.now_ms() + 59000);
    store.command({"DEL", h.keys.leases});  // the store restarted empty
    const auto [relost, reheld] = h.renew(60000, {"p1:1", "p1:2"});
    CHECK(relost == 2);
    CHECK(reheld == 2);
}

TEST_CASE("a published pause refuses every process, and a shorter one never shortens it") {
    redis_server store;
    host_view a{store, host_keys("pause.example"), "a"};
    a.publish(1, 0.5, 3000);
    const auto b = a.as("b").acquire("b:1", 30000, 4);
    CHECK_FALSE(b.granted);
    CHECK(b.pause_ms > 2900);
    CHECK(b.pause_ms <= 3000);
    CHECK(b.limit == 1);              // the collapse is shared
    CHECK(b.rate_micro == 500000);    // and the halved rate
    a.publish(1, 0.5, 100);
    CHECK(a.as("b").acquire("b:1", 30000, 4).pause_ms > 2800);
}

TEST_CASE("a published limit (growth or shrink) is the fleet's, whatever a process asks with") {
    redis_server store;
    host_view a{store, host_keys("grow.example"), "a"};
    a.publish(3, 1000, 0);
    host_view b = a.as("b");
    for (int i = 0; i < 3; ++i) CHECK(b.acquire("b:" + std::to_string(i), 30000, 2).granted);
    const auto fourth = b.acquire("b:3", 30000, 2);
    CHECK_FALSE(fourth.granted);
    CHECK(fourth.limit == 3);
}

TEST_CASE("the fleet-wide token bucket spaces departures across processes (GCRA)") {
    redis_server store;
    host_view a{store, host_keys("rate.example"), "a"};
    // 1 per second, burst 1: the first goes, the next (from another process) waits ~1 s.
    CHECK(a.acquire("a:1", 30000, 10, 1, 1).granted);
    const auto b = a.as("b").acquire("b:1", 30000, 10, 1, 1);
    CHECK_FALSE(b.granted);
    CHECK(b.wait_ms > 900);
    CHECK(b.wait_ms <= 1000);
    // Burst 3 at 1/s: three at once, then a wait.
    host_view c{store, host_keys("burst.example"), "c"};
    for (int i = 0; i < 3; ++i) CHECK(c.acquire("c:" + std::to_string(i), 30000, 10, 1, 3).granted);
    CHECK(c.acquire("c:3", 30000, 10, 1, 3).wait_ms > 900);
}

TEST_CASE("processes that asked first are served first: a fleet-wide queue of queue heads") {
    redis_server store;
    host_view a{store, host_keys("fifo.example"), "a"};
    host_view b = a.as("b");
    REQUIRE(a.acquire("a:1", 30000, 1).granted);
    CHECK_FALSE(b.acquire("b:1", 30000, 1).granted);  // b now waits in the fleet's queue
    a.release("a:1");
    // The queue is ordered by the store's millisecond (ties by process tag): let it move on.
    for (const auto asked = store.now_ms(); store.now_ms() == asked;) {
    }
    // a's next request asks first after the release, but b was waiting: a is refused.
    CHECK_FALSE(a.acquire("a:2", 30000, 1).granted);
    CHECK(b.acquire("b:1", 30000, 1).granted);
    b.release("b:1");
    CHECK(a.acquire("a:2", 30000, 1).granted);  // now a is first
}

TEST_CASE("a process that stopped asking loses its place after waiter_stale") {
    redis_server store;
    host_view a{store, host_keys("stale.example"), "a"};
    REQUIRE(a.acquire("a:1", 30000, 1).granted);
    CHECK_FALSE(a.as("gone").acquire("gone:1", 30000, 1).granted);
    a.release("a:1");
    // "gone" never asks again; 500 ms later (store time) it is dropped from the queue.
    store.command({"ZADD", a.keys.polled, std::to_string(store.now_ms() - 600), "gone"});
    CHECK(a.acquire("a:2", 30000, 1).granted);
}

TEST_CASE("every key of a host shares its hash tag: one Redis Cluster slot per host") {
    const host_keys k("api.example.com");
    for (const auto& key : {k.leases, k.state, k.waiters, k.polled}) {
        const auto open = key.find('{');
        const auto close = key.find('}');
        REQUIRE(open != std::string::npos);
        CHECK(key.substr(open + 1, close - open - 1) == "api.example.com");
    }
}

TEST_CASE("a batch: several leases in one command, as many as the bound and the bucket allow") {
    redis_server store;
    host_view h{store, host_keys("batch.test"), "p1"};
    auto r = h.batch({}, {"p1:1", "p1:2", "p1:3"}, 30000, 2);
    CHECK(r.granted == 2);  // the first two members; the third is refused
    CHECK(r.held == 2);
    CHECK(h.store.command({"ZSCORE", h.keys.leases, "p1:3"})->type == REDIS_REPLY_NIL);
    // Given back and asked for in one command: the bound is counted after the release.
    r = h.batch({"p1:1"}, {"p1:4", "p1:5"}, 30000, 2);
    CHECK(r.granted == 1);
    CHECK(h.held() == 2);
    CHECK(h.store.command({"ZSCORE", h.keys.leases, "p1:1"})->type == REDIS_REPLY_NIL);  // removed
    CHECK(h.store.command({"ZSCORE", h.keys.leases, "p1:4"})->type != REDIS_REPLY_NIL);
    // Releases alone (nothing wanted): removed, nothing granted, nobody queued.
    r = h.batch({"p1:2", "p1:4"}, {}, 30000, 2);
    CHECK(r.granted == 0);
    CHECK(h.held() == 0);
    CHECK(h.store.command({"ZCARD", h.keys.waiters})->integer == 0);  // asked for nothing: not queued
}

TEST_CASE("a batch takes one token per lease from the fleet's bucket") {
    redis_server store;
    host_view h{store, host_keys("bucket-batch.test"), "p1"};
    // rate 1/s, burst 3: three at once, the fourth waits about a second.
    auto r = h.batch({}, {"a", "b", "c", "d"}, 30000, 100, 1, 3);
    CHECK(r.granted == 3);
    CHECK(r.wait_ms > 900);
    CHECK(r.wait_ms <= 1000);
    r = h.batch({}, {"e"}, 30000, 100, 1, 3);
    CHECK(r.granted == 0);
    CHECK(r.wait_ms > 900);
}

TEST_CASE("one acquire carries the releases of other hosts; a release never adds a lease") {
    redis_server store;
    host_view a{store, host_keys("a.test"), "p1"};
    host_view b{store, host_keys("b.test"), "p1"};
    REQUIRE(b.acquire("p1:b1", 30000, 1).granted);
    CHECK_FALSE(b.acquire("p1:b2", 30000, 1).granted);
    // a's acquire gives b's lease back: b's next acquire finds the slot free.
    const auto& s = acquire_script();
    auto r = store.command({"EVAL", s.body, "5", a.keys.leases, a.keys.state, a.keys.waiters, a.keys.polled, b.keys.leases,
                            "30000", "1", "1000", "1000", "120000", "p1", "500", "0", "0", "p1:b1", "p1:a1"});
    REQUIRE(r->type == REDIS_REPLY_ARRAY);
    CHECK(r->element[0]->integer == 1);
    CHECK(b.acquire("p1:b3", 30000, 1).granted);
    // Giving back what is not held adds nothing.
    CHECK(b.release("p1:never") == 1);
    CHECK(store.command({"ZSCORE", b.keys.leases, "p1:never"})->type == REDIS_REPLY_NIL);
}

TEST_CASE("spare tokens: taken with a lease when nobody else waits and the bucket has them, given back unspent") {
    redis_server store;
    host_view h{store, host_keys("spares.test"), "p1"};
    // rate 10/s, burst 5: a lease and 4 spares, the bucket's 5 tokens (4 asked per lease).
    auto r = h.batch({}, {"p1:1"}, 30000, 10, 10, 5, 4);
    CHECK(r.granted == 1);
    CHECK(r.spares == 4);
    // The bucket is empty now: the next lease waits for its token, and takes no spare.
    r = h.batch({}, {"p1:2"}, 30000, 10, 10, 5, 4);
    CHECK(r.granted == 0);
    CHECK(r.wait_ms > 50);
    // Two spares unspent given back with the lease (2 x 100 ms of the bucket's time):
    // two leases at once again, no spare left for them.
    r = h.batch({"p1:1"}, {"p1:3", "p1:4", "p1:5"}, 30000, 10, 10, 5, 4, 200);
    CHECK(r.granted == 2);
    CHECK(r.spares == 0);
    CHECK(h.held() == 2);
    // The release script gives tokens back too: 300 ms -> three leases.
    store.command({"EVAL", release_script().body, "2", h.keys.leases, h.keys.state, "1", "p1:3", "300"});
    CHECK(h.held() == 1);
    r = h.batch({}, {"p1:6", "p1:7", "p1:8", "p1:9"}, 30000, 10, 10, 5);
    CHECK(r.granted == 3);
}

TEST_CASE("no spare tokens while another process waits for the host: its place in the queue holds") {
    redis_server store;
    host_view p1{store, host_keys("spares-queue.test"), "p1"};
    auto p2 = p1.as("p2");
    REQUIRE(p1.batch({}, {"p1:1"}, 30000, 1, 1000, 1000, 4).granted == 1);
    CHECK_FALSE(p2.acquire("p2:1", 30000, 1).granted);  // p2 waits in the fleet's queue
    for (const auto asked = store.now_ms(); store.now_ms() == asked;) {  // the queue's next millisecond
    }
    // p1 gives its lease back with its next acquire: p2 is ahead, p1 gets nothing.
    auto r = p1.batch({"p1:1"}, {"p1:2"}, 30000, 1, 1000, 1000, 4);
    CHECK(r.granted == 0);
    // p2's turn: granted; it takes spares (nobody else waits).
    r = p2.batch({}, {"p2:2"}, 30000, 1, 1000, 1000, 4);
    CHECK(r.granted == 1);
    CHECK(r.spares == 0);  // p1 waits now: none
}
