// event on a real one-thread loop: notify() and set() wake waiters, wait_until's deadline
// ends a wait with false, a lone timed wait leaves nothing behind for the next wait or
// for the waiters that joined it, a joiner's nearer deadline is its own, until_set()
// waits for set() alone and returns when cancelled, and a coroutine destroyed while it
// waits touches no event (ASan's check in the sanitizer run). Deadlines are tens of
// milliseconds; every test stops by itself within two seconds.
#include "politeproxy/base/event.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <optional>

using namespace politeproxy;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct loop {
    asio::io_context ioc{1};
    event e{ioc.get_executor()};
    clock::time_point start = clock::now();

    // Runs what was spawned, for at most 2 s.
    void run() {
        asio::steady_timer guard(ioc, 2s);
        guard.async_wait([this](boost::system::error_code ec) {
            if (!ec) ioc.stop();
        });
        ioc.run();
    }
    template <class F>
    void spawn(F body) {
        asio::co_spawn(ioc, body, asio::detached);
    }
    // Calls `f` on the loop after `d`.
    template <class F>
    void after(clock::duration d, F f) {
        spawn([this, d, f]() -> task<void> {
            steady_timer t(ioc.get_executor(), d);
            co_await t.async_wait(use_tuple);
            f();
        });
    }
    clock::duration since_start() const { return clock::now() - start; }
};

}  // namespace

TEST_CASE("a lone timed wait: notify() wakes it with true, long before its deadline") {
    loop l;
    std::optional<bool> woken;
    clock::duration at{};
    l.spawn([&]() -> task<void> {
        woken = co_await l.e.wait_until(clock::now() + 1500ms);
        at = l.since_start();
        l.ioc.stop();
    });
    l.after(20ms, [&] { l.e.notify(); });
    l.run();
    REQUIRE(woken.has_value());
    CHECK(*woken);
    CHECK(at < 1s);
}

TEST_CASE("a lone timed wait whose deadline passes gives false; the next wait() waits for notify()") {
    loop l;
    std::optional<bool> woken;
    clock::duration timed_out_at{}, waited_until{};
    l.spawn([&]() -> task<void> {
        woken = co_await l.e.wait_until(clock::now() + 20ms);
        timed_out_at = l.since_start();
        co_await l.e.wait();  // the timer no longer expires at the passed deadline
        waited_until = l.since_start();
        l.ioc.stop();
    });
    l.after(200ms, [&] { l.e.notify(); });
    l.run();
    REQUIRE(woken.has_value());
    CHECK_FALSE(*woken);
    CHECK(timed_out_at >= 20ms);
    CHECK(timed_out_at < 200ms);
    CHECK(waited_until >= 200ms);
}

TEST_CASE("a joiner's nearer deadline is its own, and notify() wakes every waiter") {
    loop l;
    std::optional<bool> first, second, third;
    clock::duration second_at{};
    int done = 0;
    const auto finish = [&] {
        if (++done == 3) l.ioc.stop();
    };
    l.spawn([&]() -> task<void> {  // alone when it starts: waits on the event's timer
        first = co_await l.e.wait_until(clock::now() + 1500ms);
        finish();
    });
    l.spawn([&]() -> task<void> {  // joins it with a nearer deadline of its own
        second = co_await l.e.wait_until(clock::now() + 30ms);
        second_at = l.since_start();
        finish();
    });
    l.spawn([&]() -> task<void> {  // joins it with no deadline
        co_await l.e.wait();
        third = true;
        finish();
    });
    l.after(300ms, [&] { l.e.notify(); });
    l.run();
    REQUIRE(second.has_value());
    CHECK_FALSE(*second);
    CHECK(second_at < 300ms);
    REQUIRE(first.has_value());
    CHECK(*first);
    CHECK(third.value_or(false));
}

TEST_CASE("set() wakes a timed waiter with true, and every later wait returns at once") {
    loop l;
    std::optional<bool> woken, later;
    clock::duration at{};
    l.spawn([&]() -> task<void> {
        woken = co_await l.e.wait_until(clock::now() + 1500ms);
        later = co_await l.e.wait_until(clock::now() + 1500ms);
        co_await l.e.wait();
        at = l.since_start();
        l.ioc.stop();
    });
    l.after(20ms, [&] { l.e.set(); });
    l.run();
    CHECK(woken.value_or(false));
    CHECK(later.value_or(false));
    CHECK(at < 1s);
}

TEST_CASE("waiters that joined a lone timed wait are not woken again and again once its deadline passed") {
    loop l;
    bool ready = false;  // the joiners' condition, true from notify() on
    int wakes = 0;
    int done = 0;
    const auto finish = [&] {
        if (++done == 3) l.ioc.stop();
    };
    l.spawn([&]() -> task<void> {
        CHECK_FALSE(co_await l.e.wait_until(clock::now() + 20ms));
        finish();
    });
    for (int i = 0; i < 2; ++i)
        l.spawn([&]() -> task<void> {
            while (!ready) {
                co_await l.e.wait();
                ++wakes;
            }
            finish();
        });
    l.after(200ms, [&] {
        ready = true;
        l.e.notify();
    });
    l.run();
    CHECK(done == 3);
    CHECK(wakes <= 6);  // the deadline's wake and notify's, for each, and not thousands
}

TEST_CASE("until_set() waits through notify() for set(), and returns when its race is lost") {
    using namespace boost::asio::experimental::awaitable_operators;
    loop l;
    clock::duration set_seen{}, race_over{};
    std::optional<std::size_t> winner;
    l.spawn([&]() -> task<void> {
        co_await l.e.until_set();
        set_seen = l.since_start();
    });
    l.spawn([&]() -> task<void> {
        event never(l.ioc.get_executor());
        steady_timer t(l.ioc.get_executor(), 30ms);
        constexpr auto awaitable = boost::asio::as_tuple(boost::asio::use_awaitable_t<executor>());
        const auto first = co_await (never.until_set() || t.async_wait(awaitable));
        winner = first.index();
        race_over = l.since_start();
    });
    l.after(20ms, [&] { l.e.notify(); });
    l.after(150ms, [&] { l.e.set(); });
    l.after(300ms, [&] { l.ioc.stop(); });
    l.run();
    CHECK(set_seen >= 150ms);
    CHECK(set_seen < 300ms);
    REQUIRE(winner.has_value());
    CHECK(*winner == 1);
    CHECK(race_over < 150ms);
}

TEST_CASE("a coroutine destroyed while it waits touches no event that is gone") {
    // The event goes first, then the loop with the waiting coroutines, never resumed.
    auto ioc = std::make_unique<asio::io_context>(1);
    auto e = std::make_unique<event>(ioc->get_executor());
    event* ev = e.get();
    asio::co_spawn(*ioc, [ev]() -> task<void> { co_await ev->wait(); }, asio::detached);
    asio::co_spawn(*ioc, [ev]() -> task<void> { co_await ev->wait_until(clock::now() + 1s); }, asio::detached);
    asio::co_spawn(*ioc, [ev]() -> task<void> { co_await ev->wait_until(clock::now() + 1s); }, asio::detached);
    ioc->poll();  // each runs to its wait
    e.reset();
    ioc.reset();  // their frames are destroyed here: ASan reports a write to the freed event
    CHECK_FALSE(ioc);
}
