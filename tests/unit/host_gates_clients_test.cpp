// host_gates with clients (clients:): caps across hosts on real executors and threads,
// the wake-up of a client's requests set aside at its max_in_flight, outcomes per client.
// No sockets and no sleeps: the gates run on a manual_time that does not move.
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/base/manual_time.hpp"
#include "host_gates_testing.hpp"

#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/config/config_load.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;

using testing::make_config;
using testing::peak_counter;
using testing::run_threads;
using testing::yield;

TEST_CASE("clients.max_in_flight holds across hosts and threads; set-aside requests go once a slot comes back") {
    auto cfg = make_config("defaults: { concurrency: 3, rate: 100000, burst: 100000 }\n"
                           "clients: { identify_by: address, max_in_flight: 2 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    auto capped = gates.clients().find("capped", time.now());
    auto other = gates.clients().find("other", time.now());
    std::vector<asio::io_context> loops(4);
    const char* keys[] = {"a.test", "b.test", "c.test"};
    peak_counter capped_held, host_held[3];
    std::atomic<int> granted{0};
    constexpr int per_client = 60;
    for (int i = 0; i < 2 * per_client; ++i) {
        const bool mine = i % 2 == 0;
        const int k = i % 3;
        asio::co_spawn(loops[static_cast<std::size_t>(i) % loops.size()], [&, mine, k]() -> task<void> {
            auto r = co_await gates.acquire(keys[k], {}, mine ? capped : other);
            REQUIRE_FALSE(r.ec);
            if (mine) capped_held.enter();
            host_held[k].enter();
            co_await yield(2 + k);
            host_held[k].leave();
            if (mine) capped_held.leave();
            r.granted.set_outcome(outcome::ok);
            ++granted;
        }, asio::detached);
    }
    run_threads(loops);
    CHECK(granted == 2 * per_client);  // nothing stalled behind the cap
    CHECK(capped_held.peak <= 2);
    for (auto& h : host_held) CHECK(h.peak <= 3);
    CHECK(capped->in_flight() == 0);
    CHECK(capped->waiting() == 0);
    CHECK(capped->outcomes()[static_cast<std::size_t>(outcome::ok)] == per_client);
    CHECK(other->outcomes()[static_cast<std::size_t>(outcome::ok)] == per_client);
}

TEST_CASE("clients.max_waiting refuses that client's next request only, as client_queue_full") {
    auto cfg = make_config("defaults: { concurrency: 1, rate: 100000, burst: 100000 }\n"
                           "clients: { identify_by: address, max_waiting: 2 }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    auto a = gates.clients().find("a", time.now());
    auto b = gates.clients().find("b", time.now());
    asio::io_context ioc;
    std::vector<boost::system::error_code> a_results, b_results;
    permit holder = gates.try_acquire("h.test", {}, a);
    REQUIRE(holder);
    for (int i = 0; i < 3; ++i)
        asio::co_spawn(ioc, [&]() -> task<void> {
            auto r = co_await gates.acquire("h.test", {}, a);
            a_results.push_back(r.ec);
        }, asio::detached);
    asio::co_spawn(ioc, [&]() -> task<void> {
        auto r = co_await gates.acquire("h.test", {}, b);
        b_results.push_back(r.ec);
    }, asio::detached);
    ioc.poll();
    REQUIRE(a_results.size() == 1);  // the third of A's: refused at once
    CHECK(a_results[0] == errc::client_queue_full);
    CHECK(a->waiting() == 2);
    CHECK(b->waiting() == 1);  // B parked
    CHECK(a->outcomes()[static_cast<std::size_t>(outcome::rejected)] == 1);
    holder.set_outcome(outcome::ok);
    holder.reset();  // the slot goes round: B's turn comes within the first round
    ioc.poll();
    CHECK(a_results.size() + b_results.size() >= 2);
    gates.close();
    ioc.run();
}

TEST_CASE("the client book: names found again, a bounded number of them, idle ones forgotten") {
    auto cfg = make_config("clients: { identify_by: address, weights: {heavy: 3} }\n");
    manual_time time;
    host_gates gates(cfg, time_source(time));
    client_book& book = gates.clients();
    auto heavy = book.find("heavy", time.now());
    CHECK(heavy->weight() == 3);
    CHECK(book.find("heavy", time.now()) == heavy);
    auto anonymous = book.find("", time.now());
    CHECK(anonymous->name() == "anonymous");
    // Every name beyond max_clients while all are held goes to anonymous's share.
    std::vector<std::shared_ptr<client_state>> held;
    for (std::size_t i = book.size(); i < client_book::max_clients; ++i)
        held.push_back(book.find("c" + std::to_string(i), time.now()));
    CHECK(book.size() == client_book::max_clients);
    CHECK(book.find("one-more", time.now())->name() == "anonymous");
    // Once they are idle, a new name makes room at once.
    held.clear();
    CHECK(book.find("another", time.now())->name() == "another");
    CHECK(book.size() == 3);  // heavy and anonymous are held; another
    // And evict_idle forgets what idled for the period, telling whose counts went.
    std::vector<std::string> gone;
    time.advance(std::chrono::seconds(61));
    heavy.reset();
    anonymous.reset();
    book.evict_idle(time.now(), std::chrono::seconds(60), [&](const std::string& name, const client_counts&) { gone.push_back(name); });
    CHECK(book.size() == 0);
    CHECK(std::find(gone.begin(), gone.end(), "heavy") != gone.end());
}
