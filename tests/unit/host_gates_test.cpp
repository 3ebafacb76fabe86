// host_gates with real executors: many threads, parked requests, cancellation, deadlines.
// No sockets; a permit is held across a short timer. Run under ThreadSanitizer with
// -DPOLITEPROXY_TSAN=ON to check the locking.
#include "politeproxy/exchange/host_gates.hpp"

#include "politeproxy/config/config_load.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <list>
#include <thread>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<const config> make_config(const std::string& yaml) {
    auto c = load_config_text(yaml, "test.yaml");
    REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error()));
    return std::make_shared<const config>(std::move(*c));
}

// One single-threaded loop per thread, as the proxy's workers run.
void run_threads(std::vector<asio::io_context>& loops) {
    std::vector<std::thread> threads;
    for (auto& ioc : loops) threads.emplace_back([&ioc] { ioc.run(); });
    for (auto& t : threads) t.join();
}

task<void> sleep_for(clock::duration d) {
    steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
}

struct host_counter {
    std::atomic<int> now{0};
    std::atomic<int> peak{0};
    void enter() {
        const int n = ++now;
        int p = peak.load();
        while (n > p && !peak.compare_exchange_weak(p, n)) {
        }
    }
    void leave() { --now; }
};

}  // namespace

TEST_CASE("many threads never hold more permits than the limit, and all get one") {
    auto cfg = make_config("defaults: { concurrency: 3, rate: 100000, burst: 100000 }\n");
    host_gates gates(cfg);
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
                co_await sleep_for(1ms);
                counters[k].leave();
                r.granted.set_outcome(outcome::ok);
                ++granted;
            }, asio::detached);
    run_threads(loops);
    CHECK(granted == 3 * per_key);
    for (auto& c : counters) CHECK(c.peak == 3);
    for (const auto& h : gates.snapshot(clock::now())) {
        CHECK(h.in_flight == 0);
        CHECK(h.waiting == 0);
        CHECK(h.outcomes[static_cast<std::size_t>(outcome::ok)] == per_key);
    }
}

TEST_CASE("requests cancelled while parked leak nothing and are never granted") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 100000, burst: 100000 }\n");
    host_gates gates(cfg);
    asio::io_context ioc(1);  // signals are emitted from one thread, as asio requires
    std::list<asio::cancellation_signal> signals(20);
    std::atomic<int> cancelled{0}, granted_late{0};

    asio::co_spawn(ioc, [&]() -> task<void> {
        auto holder = co_await gates.acquire("x.test");
        REQUIRE_FALSE(holder.ec);
        for (auto& s : signals)
            asio::co_spawn(ioc, [&]() -> task<void> {
                auto r = co_await gates.acquire("x.test");
                if (r.ec == errc::cancelled) ++cancelled;
            }, asio::bind_cancellation_slot(s.slot(), asio::detached));
        co_await sleep_for(20ms);  // let them all park
        for (auto& s : signals) s.emit(asio::cancellation_type::terminal);
        co_await sleep_for(20ms);
        holder.granted.reset();
        // The slot must be free at once: nobody cancelled holds it.
        auto next = co_await gates.acquire("x.test");
        REQUIRE_FALSE(next.ec);
        CHECK(next.granted.queue_wait() < 1s);
        ++granted_late;
    }, asio::detached);
    ioc.run();
    CHECK(cancelled == 20);
    CHECK(granted_late == 1);
    const auto hosts = gates.snapshot(clock::now());
    REQUIRE(hosts.size() == 1);
    CHECK(hosts[0].in_flight == 0);
    CHECK(hosts[0].waiting == 0);
}

TEST_CASE("a parked request gives up at queue.max_wait with a Retry-After hint") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1000, queue: { max_wait: 50ms } }\n");
    host_gates gates(cfg);
    asio::io_context ioc(1);
    boost::system::error_code late;
    clock::duration hint{};
    asio::co_spawn(ioc, [&]() -> task<void> {
        auto holder = co_await gates.acquire("y.test");
        REQUIRE_FALSE(holder.ec);
        auto r = co_await gates.acquire("y.test");
        late = r.ec;
        hint = r.retry_after;
    }, asio::detached);
    ioc.run();
    CHECK(late == errc::queue_timeout);
    CHECK(hint >= 1s);
    CHECK(gates.snapshot(clock::now()).at(0).in_flight == 0);
}

TEST_CASE("idle gates are evicted, busy ones are kept") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 1000, burst: 1 }\n");
    host_gates gates(cfg);
    asio::io_context ioc(1);
    permit kept;
    asio::co_spawn(ioc, [&]() -> task<void> {
        auto a = co_await gates.acquire("idle.test");
        auto b = co_await gates.acquire("busy.test");
        kept = std::move(b.granted);
    }, asio::detached);
    ioc.run();
    CHECK(gates.size() == 2);
    CHECK(gates.evict_idle(clock::now() + 1h, 1min) == 1);
    CHECK(gates.size() == 1);
    CHECK(gates.snapshot(clock::now()).at(0).key == "busy.test");
    kept.reset();
    CHECK(gates.evict_idle(clock::now() + 1h, 1min) == 1);
    CHECK(gates.size() == 0);
}

TEST_CASE("an origin's stream ceiling caps the host's limit; the excess waits in order and goes as it lifts") {
    auto cfg = make_config("defaults: {concurrency: 50, rate: 1000000, burst: 1000000}\n");
    host_gates gates(cfg);
    const std::string key = "h2.test";

    gates.set_stream_ceiling(key, 3);
    std::vector<permit> held;
    for (int i = 0; i < 5; ++i)
        if (permit p = gates.try_acquire(key)) held.push_back(std::move(p));
    CHECK(held.size() == 3);  // configured 50, the origin takes 3
    auto snap = gates.snapshot(clock::now());
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
    io.run_for(50ms);
    CHECK(order.empty());
    CHECK(gates.snapshot(clock::now())[0].waiting == 4);

    gates.set_stream_ceiling(key, 5);  // two more
    io.restart();
    io.run_for(50ms);
    CHECK(order == std::vector<int>{0, 1});

    gates.set_stream_ceiling(key, std::nullopt);  // lifted: the configured 50 again
    io.restart();
    io.run_for(50ms);
    CHECK(order == std::vector<int>{0, 1, 2, 3});
    CHECK(gates.snapshot(clock::now())[0].limit == 50);

    // A lower ceiling leaves requests in flight alone and stops replacing them.
    gates.set_stream_ceiling(key, 2);
    CHECK(gates.snapshot(clock::now())[0].in_flight == 7);
    held.resize(2);  // 5 released: still at the ceiling, nothing more goes
    CHECK_FALSE(gates.try_acquire(key));
    held.clear();
    CHECK(gates.try_acquire(key));
}
