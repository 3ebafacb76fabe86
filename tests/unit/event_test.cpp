// event on a real one-thread loop: notify() and set() wake waiters, wait_until's deadline
// ends a wait with false, a lone timed wait leaves nothing behind for the next wait, and
// waiters that share an event each keep their own deadline. Deadlines are tens of
// milliseconds; every test stops by itself within two seconds.
#include "politeproxy/base/event.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <doctest/doctest.h>

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

TEST_CASE("waiters that share an event keep their own deadlines, and notify() wakes them all") {
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
