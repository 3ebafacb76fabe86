// off_thread: work on a pool, its result or what it threw back in the waiting coroutine.
#include "politeproxy/base/off_thread.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <thread>

using namespace politeproxy;
namespace asio = boost::asio;
using namespace std::chrono_literals;

TEST_CASE("the work's result comes back to the waiting coroutine, on its own thread") {
    asio::io_context loop;
    asio::thread_pool pool(1);
    std::optional<std::thread::id> worked_on;
    std::optional<int> got;
    asio::co_spawn(loop, [&]() -> task<void> {
        auto work = [&] {
            worked_on = std::this_thread::get_id();
            return 42;
        };
        got = co_await off_thread(pool, std::move(work), clock::now() + 30s);
        CHECK(std::this_thread::get_id() != *worked_on);  // back on the loop's thread
    }, asio::detached);
    loop.run();
    CHECK(got == 42);
}

TEST_CASE("what the work throws is thrown in the waiting coroutine, not on the pool's thread") {
    asio::io_context loop;
    asio::thread_pool pool(1);
    std::string caught;
    asio::co_spawn(loop, [&]() -> task<void> {
        auto work = []() -> int { throw std::runtime_error("no memory for the answer"); };
        try {
            co_await off_thread(pool, std::move(work), clock::now() + 30s);
        } catch (const std::runtime_error& e) {
            caught = e.what();
        }
    }, asio::detached);
    loop.run();  // a pool thread that let it escape would have ended the process (std::terminate)
    CHECK(caught == "no memory for the answer");
    // The pool still works.
    std::optional<int> again;
    asio::co_spawn(loop, [&]() -> task<void> {
        auto work = [] { return 7; };
        again = co_await off_thread(pool, std::move(work), clock::now() + 30s);
    }, asio::detached);
    loop.restart();
    loop.run();
    CHECK(again == 7);
}
