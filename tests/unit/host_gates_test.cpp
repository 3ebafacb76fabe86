// host_gates with real executors: many threads, parked requests, cancellation, deadlines.
// No sockets and no sleeps: the gates run on a manual_time, the tests drive the loops
// (poll) and move the time by hand; permits are held across yields. Run under
// ThreadSanitizer with -DPOLITEPROXY_TSAN=ON to check the locking.
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/base/manual_time.hpp"
#include "host_gates_testing.hpp"

#include "politeproxy/config/config_load.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <list>
#include <optional>
#include <thread>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;
using namespace std::chrono_literals;

using testing::make_config;
using testing::run_threads;
using testing::yield;
using host_counter = testing::peak_counter;

TEST_CASE("many threads never hold more permits than the limit, and all get one") {
    auto cfg = make_config("defaults: { concurrency: 3, rate: 100000, burst: 100000 }\n");
    manual_time time;  // never moves: the slots, not the tokens, are the limit here
    host_gates gates(cfg, time_source(time));
    std::vector<asio::io_context> loops(4);
    const char* keys[] = {"a.test", "b.test", "c.test"};
    host_counter counters[3];
    std::atomic<int> granted{0};
    constexpr int per_key = 60;
    for (int k = 0; k < 3; ++k)
        for (int i = 0; i < per_key; ++i)
            asio::co_spawn(loops[(k * per_key + i) % loops.size()], [&, k]() -> task<void> {
                auto r = co_await gates.acquire(keys[k]);
                REQUIRE_FALSE(r.ec);
                counters[k].enter();
                co_await yield();
                counters[k].leave();
                r.granted.set_outcome(outcome::ok);
                ++granted;
            }, asio::detached);
    run_threads(loops);
    CHECK(granted == 3 * per_key);
    for (auto& c : counters) CHECK(c.peak == 3);
    for (const auto& h : gates.snapshot(time.now())) {
        CHECK(h.in_flight == 0);
        CHECK(h.waiting == 0);
        CHECK(h.outcomes[static_cast<std::size_t>(outcome::ok)] == per_key);
    }
}

TEST_CASE("requests cancelled while parked leak nothing and are never granted") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 100000, burst: 100000 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    asio::io_context ioc(1);  // signals are emitted from the thread that runs it, as asio requires
    std::list<asio::cancellation_signal> signals(20);
    int cancelled = 0;

    permit holder = gates.try_acquire("x.test");
    REQUIRE(holder);
    for (auto& s : signals)
        asio::co_spawn(ioc, [&]() -> task<void> {
            auto r = co_await gates.acquire("x.test");
            if (r.ec == errc::cancelled) ++cancelled;
        }, asio::bind_cancellation_slot(s.slot(), asio::detached));
    ioc.poll();
    CHECK(gates.snapshot(time.now()).at(0).waiting == 20);
    for (auto& s : signals) s.emit(asio::cancellation_type::terminal);
    ioc.poll();
    CHECK(cancelled == 20);
    CHECK(ioc.stopped());  // nothing left waiting
    holder.reset();
    // The slot is free at once: nobody cancelled holds it.
    CHECK(gates.try_acquire("x.test"));
    const auto hosts = gates.snapshot(time.now());
    REQUIRE(hosts.size() == 1);
    CHECK(hosts[0].in_flight == 0);
    CHECK(hosts[0].waiting == 0);
}

TEST_CASE("a parked request gives up at queue.max_wait, not a moment sooner, with a Retry-After hint") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1000, queue: { max_wait: 50ms } }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    asio::io_context ioc(1);
    std::optional<acquire_result> late;
    permit holder = gates.try_acquire("y.test");
    REQUIRE(holder);
    asio::co_spawn(ioc, [&]() -> task<void> { late = co_await gates.acquire("y.test"); }, asio::detached);
    ioc.poll();
    time.advance(49ms);
    ioc.poll();
    CHECK_FALSE(late);
    CHECK(gates.snapshot(time.now()).at(0).waiting == 1);
    time.advance(1ms);
    ioc.poll();
    REQUIRE(late);
    CHECK(late->ec == errc::queue_timeout);
    CHECK(late->retry_after >= 1s);
    CHECK(gates.snapshot(time.now()).at(0).waiting == 0);
    CHECK(gates.snapshot(time.now()).at(0).in_flight == 1);  // the holder's
}

TEST_CASE("a parked request waits for its token's due time on the gates' clock") {
    auto cfg = make_config("defaults: { concurrency: 5, rate: 10, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    asio::io_context ioc(1);
    permit first = gates.try_acquire("paced.test");
    REQUIRE(first);  // the burst's one token
    std::optional<acquire_result> second;
    asio::co_spawn(ioc, [&]() -> task<void> { second = co_await gates.acquire("paced.test"); }, asio::detached);
    ioc.poll();
    time.advance(99ms);  // 10 per second: the next token is due 100 ms after the first
    ioc.poll();
    CHECK_FALSE(second);
    time.advance(1ms + 1ns);  // token_bucket::wait_for_token rounds up by a tick
    ioc.poll();
    REQUIRE(second);
    CHECK_FALSE(second->ec);
    CHECK(second->granted.queue_wait() == 100ms + 1ns);
}

TEST_CASE("idle gates are evicted, busy ones are kept") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    CHECK(gates.try_acquire("idle.test"));
    permit kept = gates.try_acquire("busy.test");
    REQUIRE(kept);
    CHECK(gates.size() == 2);
    CHECK(gates.evict_idle(time.now() + 30s, 1min) == 0);  // not idle long enough
    time.advance(1h);
    CHECK(gates.evict_idle(time.now(), 1min) == 1);
    CHECK(gates.size() == 1);
    CHECK(gates.snapshot(time.now()).at(0).key == "busy.test");
    kept.reset();
    time.advance(1h);
    CHECK(gates.evict_idle(time.now(), 1min) == 1);
    CHECK(gates.size() == 0);
}

TEST_CASE("a host with an HTTP/2 session open is not evicted; once its last session goes it is") {
    auto cfg = make_config("defaults: { concurrency: 4, rate: 1000, burst: 1 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const int a = 0, b = 0;  // any address names a session
    gates.set_stream_ceiling("h2.test", &a, 3);
    gates.set_stream_ceiling("h2.test", &b, std::nullopt);
    time.advance(1h);
    CHECK(gates.evict_idle(time.now(), 1min) == 0);
    gates.forget_stream_ceiling("h2.test", &a);
    CHECK(gates.evict_idle(time.now(), 1min) == 0);  // b is still open
    auto snap = gates.snapshot(time.now());
    REQUIRE(snap.size() == 1);
    CHECK(snap[0].h2);
    CHECK_FALSE(snap[0].stream_ceiling.has_value());  // b sets none
    gates.forget_stream_ceiling("h2.test", &b);
    CHECK_FALSE(gates.snapshot(time.now()).at(0).h2);
    CHECK(gates.evict_idle(time.now(), 1min) == 1);
}

TEST_CASE("robots.txt: the request told to fetch it holds the gate from that moment; nobody else departs until it ends") {
    auto cfg = make_config("defaults: { concurrency: 4, rate: 1000, burst: 10 }\nrobots: { crawl_delay: honor }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const std::string origin = "http://polite.test:80";
    std::optional<robots_turn> first(gates.robots_due(origin, "polite.test", {}));
    REQUIRE(*first);
    REQUIRE(first->slot);
    // The next request is not due and finds the gate held, though three slots are free.
    auto second = gates.robots_due(origin, "polite.test", {});
    CHECK_FALSE(second);
    CHECK_FALSE(second.slot);
    CHECK_FALSE(gates.try_acquire("polite.test"));
    CHECK(gates.try_acquire("other.test"));  // one host's hold is its own
    first->slot.reset();
    CHECK_FALSE(gates.try_acquire("polite.test"));  // the turn's end, not its slot, lifts the hold
    first->read = {robots_read::kind::rules,
                   std::make_shared<const robots_rules>(robots_rules::parse("User-agent: *\nDisallow: /x\n")), 0.001};
    first.reset();
    CHECK(gates.try_acquire("polite.test"));
    CHECK_FALSE(gates.robots_due(origin, "polite.test", {}));  // read once per cache_ttl
    const auto said = gates.robots_verdict_for(origin);
    REQUIRE(said.what == robots_verdict::kind::read);
    CHECK_FALSE(said.rules->allowed("/x/1", "bot"));
    CHECK(said.rules->allowed("/y", "bot"));
}

TEST_CASE("robots.txt: disallow: enforce alone reads the rules and leaves the rate alone") {
    auto cfg = make_config("defaults: { concurrency: 4, rate: 1000, burst: 10 }\nrobots: { disallow: enforce }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const std::string origin = "http://rules.test:80";
    {
        auto turn = gates.robots_due(origin, "rules.test", {});
        REQUIRE(turn);
        turn.read = {robots_read::kind::rules,
                     std::make_shared<const robots_rules>(robots_rules::parse("User-agent: *\nCrawl-delay: 10\n")),
                     10.0};
    }
    CHECK(gates.snapshot(time.now()).at(0).rate == 1000);
    CHECK(gates.robots_verdict_for(origin).what == robots_verdict::kind::read);
}

TEST_CASE("robots.txt: an unreachable read holds every request until the host's backoff has passed") {
    auto cfg = make_config("defaults: { concurrency: 4, rate: 1000, burst: 10, backoff: { initial: 2s, max: 8s } }\n"
                           "robots: { disallow: enforce }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const std::string origin = "http://down.test:80";
    {
        auto turn = gates.robots_due(origin, "down.test", {});
        turn.read.what = robots_read::kind::unreachable;  // a 5xx, say
    }
    const auto said = gates.robots_verdict_for(origin);
    CHECK(said.what == robots_verdict::kind::unreachable);
    CHECK(said.retry_after == 2s);
    CHECK_FALSE(gates.robots_due(origin, "down.test", {}));
    time.advance(2s);
    CHECK(gates.robots_due(origin, "down.test", {}));
}

TEST_CASE("robots.txt: a turn that never asked (the proxy's own refusal) blocks nobody and counts no failure") {
    auto cfg = make_config("defaults: { concurrency: 4, rate: 1000, burst: 10 }\nrobots: { disallow: enforce }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const std::string origin = "http://refused.test:80";
    { auto turn = gates.robots_due(origin, "refused.test", {}); }  // ended without asking: not_read
    CHECK(gates.robots_verdict_for(origin).what == robots_verdict::kind::unknown);
    CHECK(gates.robots_due(origin, "refused.test", {}));  // the next request fetches at once
}

TEST_CASE("robots.txt: a turn that ends unused (its fetch never ran) lifts its hold and gives its slot back") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 10 }\nrobots: { crawl_delay: honor }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    {
        auto turn = gates.robots_due("http://lost.test:80", "lost.test", {});
        REQUIRE(turn);
        REQUIRE(turn.slot);
        auto moved = std::move(turn);  // handed on (to a fetch coroutine that never starts)
        CHECK_FALSE(turn);
        CHECK_FALSE(gates.try_acquire("lost.test"));
    }
    permit p = gates.try_acquire("lost.test");
    CHECK(p);
    CHECK(gates.snapshot(time.now()).at(0).in_flight == 1);
}

TEST_CASE("an origin's stream ceiling caps the host's limit; the excess waits in order and goes as it lifts") {
    auto cfg = make_config("defaults: {concurrency: 50, rate: 1000000, burst: 1000000}\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const std::string key = "h2.test";
    const int session = 0;  // any address names a session

    gates.set_stream_ceiling(key, &session, 3);
    std::vector<permit> held;
    for (int i = 0; i < 5; ++i)
        if (permit p = gates.try_acquire(key)) held.push_back(std::move(p));
    CHECK(held.size() == 3);  // configured 50, the origin takes 3
    auto snap = gates.snapshot(time.now());
    REQUIRE(snap.size() == 1);
    CHECK(snap[0].limit == 3);
    CHECK(snap[0].configured_limit == 50);
    REQUIRE(snap[0].stream_ceiling.has_value());
    CHECK(*snap[0].stream_ceiling == 3);

    // Parked behind the ceiling, in arrival order; raising it admits them at once.
    asio::io_context io;
    std::vector<int> order;
    for (int i = 0; i < 4; ++i)
        asio::co_spawn(io, [&, i]() -> task<void> {
            auto r = co_await gates.acquire(key);
            REQUIRE_FALSE(r.ec);
            order.push_back(i);
            held.push_back(std::move(r.granted));
        }, asio::detached);
    io.poll();
    CHECK(order.empty());
    CHECK(gates.snapshot(time.now())[0].waiting == 4);

    gates.set_stream_ceiling(key, &session, 5);  // two more
    io.poll();
    CHECK(order == std::vector<int>{0, 1});

    gates.set_stream_ceiling(key, &session, std::nullopt);  // lifted: the configured 50 again
    io.poll();
    CHECK(order == std::vector<int>{0, 1, 2, 3});
    CHECK(gates.snapshot(time.now())[0].limit == 50);

    // A lower ceiling leaves requests in flight alone and stops replacing them.
    gates.set_stream_ceiling(key, &session, 2);
    CHECK(gates.snapshot(time.now())[0].in_flight == 7);
    held.resize(2);  // 5 released: still at the ceiling, nothing more goes
    CHECK_FALSE(gates.try_acquire(key));
    held.clear();
    CHECK(gates.try_acquire(key));
}

TEST_CASE("stream ceilings are per session: the host's is the lowest open one, and each goes with its session") {
    auto cfg = make_config("defaults: {concurrency: 50, rate: 1000000, burst: 1000000}\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    const std::string key = "two-origins.test";
    const int http_origin = 0, https_origin = 0;  // two sessions of one host key (http and https)
    const auto limit = [&] { return gates.snapshot(time.now()).at(0).limit; };

    gates.set_stream_ceiling(key, &http_origin, 10);
    gates.set_stream_ceiling(key, &https_origin, 3);
    CHECK(limit() == 3);  // neither origin is ever asked for more than it takes
    gates.set_stream_ceiling(key, &https_origin, 20);  // new SETTINGS from that origin
    CHECK(limit() == 10);
    gates.forget_stream_ceiling(key, &http_origin);
    CHECK(limit() == 20);
    CHECK(gates.snapshot(time.now()).at(0).h2);
    // The last session ended (the origin went back to HTTP/1.1): the ceiling is lifted.
    gates.forget_stream_ceiling(key, &https_origin);
    CHECK(limit() == 50);
    CHECK_FALSE(gates.snapshot(time.now()).at(0).stream_ceiling);
    CHECK_FALSE(gates.snapshot(time.now()).at(0).h2);
    // One that took no streams at all (0) holds the host only while it lives.
    gates.set_stream_ceiling(key, &http_origin, 0);
    CHECK_FALSE(gates.try_acquire(key));
    gates.forget_stream_ceiling(key, &http_origin);
    CHECK(gates.try_acquire(key));
    gates.forget_stream_ceiling("never-seen.test", &http_origin);  // nothing to forget: no entry made
    CHECK(gates.size() == 1);
}

TEST_CASE("groups: hosts of one domain on many threads never exceed the domain's cap; leavers leave it whole") {
    auto cfg = make_config("defaults: { concurrency: 2, rate: 100000, burst: 100000, queue: { max_wait: 20ms } }\n"
                           "groups: { domain: { concurrency: 3 } }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    host_counter domain;
    std::atomic<int> granted{0}, refused{0};
    std::vector<asio::io_context> loops(4);
    for (std::size_t t = 0; t < loops.size(); ++t)
        for (int i = 0; i < 40; ++i)
            asio::co_spawn(loops[t], [&, t, i]() -> task<void> {
                const std::string host = "h" + std::to_string((t + static_cast<std::size_t>(i)) % 6) + ".site.test";
                auto r = co_await gates.acquire(host);
                if (r.ec) {  // waited past max_wait: it must have left its host slot and the group's queue
                    ++refused;
                    co_return;
                }
                domain.enter();
                time.advance(1ms);  // each grant moves the time on: those parked long enough give up
                co_await yield();
                domain.leave();
                ++granted;
            }, asio::detached);
    run_threads(loops);
    CHECK(granted + refused == 160);
    CHECK(granted > 0);
    CHECK(refused > 0);  // some left while parked at the group
    CHECK(domain.peak <= 3);
    CHECK(domain.peak == 3);
    for (const auto& h : gates.snapshot(time.now())) {
        REQUIRE(h.domain_group);
        CHECK(h.domain_group->key == "site.test");
        CHECK(h.domain_group->in_flight == 0);
        CHECK(h.domain_group->waiting == 0);
        CHECK(h.in_flight == 0);
        CHECK(h.waiting == 0);
    }
}

TEST_CASE("groups: a request parked at its group when its host turns observe-only departs holding no group slot") {
    const std::string groups = "groups: { domain: { concurrency: 1 } }\n";
    manual_time time;
    host_gates gates(make_config("defaults: { concurrency: 1, rate: 100000, burst: 100000 }\n" + groups),
                     time_source(time));
    asio::io_context ioc(1);
    auto group_of = [&](const std::string& host) {
        for (const auto& h : gates.snapshot(time.now()))
            if (h.key == host && h.domain_group) return *h.domain_group;
        return host_snapshot::group_view{};
    };
    permit a = gates.try_acquire("a.site.test");
    REQUIRE(a);
    permit b, c;
    asio::co_spawn(ioc, [&]() -> task<void> { b = std::move((co_await gates.acquire("b.site.test")).granted); },
                   asio::detached);
    asio::co_spawn(ioc, [&]() -> task<void> { c = std::move((co_await gates.acquire("c.site.test")).granted); },
                   asio::detached);
    ioc.poll();
    CHECK(group_of("c.site.test").waiting == 2);
    // Every host but c.site.test now only observes: b departs at once, without the group.
    gates.set_config(make_config("defaults: { concurrency: 1, rate: 100000, burst: 100000, enforce: false }\n"
                                 "hosts: { c.site.test: { enforce: true } }\n" + groups));
    ioc.poll();
    CHECK(b);
    CHECK_FALSE(c);
    CHECK(group_of("c.site.test").in_flight == 1);  // a's
    CHECK(group_of("c.site.test").waiting == 1);    // c's
    a.reset();
    ioc.poll();
    CHECK(c);
    CHECK(group_of("c.site.test").in_flight == 1);  // c's
    b.reset();
    c.reset();
    CHECK(group_of("c.site.test").in_flight == 0);
    CHECK(group_of("c.site.test").waiting == 0);
}

TEST_CASE("a live override caps a tracked host at once, applies to one tracked later, lasts through a reload") {
    auto cfg = make_config("defaults: { concurrency: 4, rate: 1000, burst: 10 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    std::vector<permit> held;
    for (int i = 0; i < 3; ++i) held.push_back(gates.try_acquire("busy.test"));
    live_override cap;
    cap.key = "busy.test";
    cap.concurrency = 1;
    cap.rate = 2;
    gates.set_live_override("busy.test", std::make_shared<const live_override>(cap));
    const auto busy = [&] {
        for (const auto& h : gates.snapshot(time.now()))
            if (h.key == "busy.test") return h;
        FAIL("busy.test is not tracked");
        return host_snapshot{};
    };
    CHECK(busy().in_flight == 3);  // those in flight finish
    CHECK(busy().limit == 1);
    CHECK(busy().override_source == "api");
    CHECK_FALSE(gates.try_acquire("busy.test"));
    held.clear();
    permit one = gates.try_acquire("busy.test");
    CHECK(one);
    CHECK_FALSE(gates.try_acquire("busy.test"));  // a hard cap: never above 1

    gates.set_config(make_config("defaults: { concurrency: 3, rate: 1000, burst: 10 }\n"));  // a reload keeps it
    CHECK(busy().limit == 1);
    CHECK(busy().configured_limit == 1);

    live_override pause;
    pause.key = "later.test";
    pause.pause_until = std::chrono::system_clock::now() + std::chrono::seconds(30);
    gates.set_live_override("later.test", std::make_shared<const live_override>(pause));
    CHECK_FALSE(gates.try_acquire("later.test"));  // tracked now, paused from the start

    gates.set_live_override("busy.test", nullptr);
    one.reset();
    CHECK(busy().limit == 3);
    CHECK(busy().override_source.empty());
}
