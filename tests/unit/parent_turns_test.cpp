// The turns a parent proxy gives (parent_state: max_connections) with real executors:
// a turn handed over on release, a wait past its deadline, a waiter whose loop is
// destroyed while it waits, many threads; and the request head readdressed to a parent.
// No sockets, no sleeps (a wait that must end does so at a deadline already past).
#include "politeproxy/exchange/parent_requests.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/http1/origin_target.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <memory_resource>
#include <thread>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<parent_state> parent(std::size_t max_connections) {
    parent_config c;
    c.name = "pool-a";
    c.host = "127.0.0.1";
    c.port = 3129;
    c.max_connections = max_connections;
    return std::make_shared<parent_state>(c, time_source{}, 1);
}

const clock::time_point far = clock::now() + 1h;

}  // namespace

TEST_CASE("a turn given back goes to the first waiter; busy counts what is carried") {
    auto p = parent(2);
    asio::io_context ioc;
    std::vector<int> order;
    std::vector<parent_turn> granted;  // the waiters' turns, held until the test lets them go
    parent_turn held[2];
    for (int i = 0; i < 2; ++i) {
        REQUIRE(p->try_take());
        held[i] = parent_turn(p);
    }
    CHECK_FALSE(p->try_take());
    for (int i = 0; i < 2; ++i)
        asio::co_spawn(ioc, [&, i]() -> task<void> {
            const bool got = co_await p->take(far);
            CHECK(got);
            granted.emplace_back(p);
            order.push_back(i);
        }, asio::detached);
    ioc.poll();
    CHECK(order.empty());
    CHECK(p->busy() == 2);
    held[0].reset();  // handed to waiter 0: busy stays 2
    ioc.poll();
    CHECK(order == std::vector<int>{0});
    CHECK(p->busy() == 2);
    held[1].reset();
    ioc.run();
    CHECK(order == std::vector<int>{0, 1});
    CHECK(p->busy() == 2);
    granted.clear();
    CHECK(p->busy() == 0);
}

TEST_CASE("a wait past its deadline ends without a turn, and leaves the queue") {
    auto p = parent(1);
    REQUIRE(p->try_take());
    parent_turn held(p);
    asio::io_context ioc;
    bool done = false, got = true;
    asio::co_spawn(ioc, [&]() -> task<void> {
        got = co_await p->take(clock::now());  // already past
        done = true;
    }, asio::detached);
    ioc.run();
    CHECK(done);
    CHECK_FALSE(got);
    held.reset();  // nobody waits: the turn is free again
    CHECK(p->busy() == 0);
    CHECK(p->try_take());
    p->release();
}

TEST_CASE("a waiter whose loop is destroyed leaves the queue; a turn handed to it comes back") {
    auto p = parent(1);
    REQUIRE(p->try_take());
    parent_turn held(p);
    {
        asio::io_context ioc;
        asio::co_spawn(ioc, [&]() -> task<void> {
            if (co_await p->take(far)) p->release();
        }, asio::detached);
        ioc.poll();  // parked in the queue
    }  // its frame destroyed with the loop
    held.reset();
    CHECK(p->busy() == 0);  // not handed to the gone waiter

    REQUIRE(p->try_take());
    parent_turn again(p);
    {
        asio::io_context ioc;
        asio::co_spawn(ioc, [&]() -> task<void> {
            if (co_await p->take(far)) p->release();
        }, asio::detached);
        ioc.poll();
        again.reset();  // handed over: the hand-over is posted to the loop, which never runs it
    }
    CHECK(p->busy() == 0);  // the unclaimed turn came back when the frame went
}

TEST_CASE("many threads: never more than max_connections at once, none lost") {
    auto p = parent(3);
    std::vector<asio::io_context> loops(4);
    std::atomic<int> now{0}, peak{0}, done{0};
    for (auto& ioc : loops)
        for (int i = 0; i < 50; ++i)
            asio::co_spawn(ioc, [&]() -> task<void> {
                for (int k = 0; k < 5; ++k) {
                    if (!p->try_take() && !co_await p->take(far)) co_return;
                    parent_turn mine(p);
                    const int n = ++now;
                    int seen = peak.load();
                    while (n > seen && !peak.compare_exchange_weak(seen, n)) {
                    }
                    co_await asio::post(co_await asio::this_coro::executor, asio::deferred);
                    --now;
                }
                ++done;
            }, asio::detached);
    std::vector<std::thread> threads;
    for (auto& ioc : loops) threads.emplace_back([&ioc] { ioc.run(); });
    for (auto& t : threads) t.join();
    CHECK(done == 200);
    CHECK(peak <= 3);
    CHECK(p->busy() == 0);
}

TEST_CASE("a request head readdressed to a parent: absolute-form, its credentials last") {
    std::pmr::monotonic_buffer_resource memory;
    const auto target = [&](std::string_view url) {
        return std::get<origin_target>(parse_origin_target(url, wire_allocator(&memory)));
    };
    std::string head = "GET /a?b=1 HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 p\r\n\r\n";
    readdress_to_parent(head, target("http://a.test/a?b=1"), "Basic dTpw");
    CHECK(head == "GET http://a.test/a?b=1 HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 p\r\nProxy-Authorization: Basic dTpw\r\n\r\n");

    head = "OPTIONS * HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n";
    readdress_to_parent(head, target("http://[::1]:8080"), "");
    CHECK(head == "OPTIONS http://[::1]:8080 HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");

    for (std::string odd : {std::string("GET"), std::string("GET / HTTP/1.1\r\nHost: a\r\n")}) {
        const std::string before = odd;
        readdress_to_parent(odd, target("http://a.test/"), "Basic dTpw");
        CHECK(odd == before);  // not a head the proxy wrote: left alone
    }
}
