// password_checks: new credentials hashed on a thread of their own, bounded in number and
// in waiting time. Real executors, no sockets.
#include "politeproxy/server/password_checks.hpp"

#include "politeproxy/policy/proxy_users.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <crypt.h>
#include <openssl/evp.h>

#include <algorithm>
#include <thread>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::string basic(std::string_view credentials) {
    std::string out(4 * ((credentials.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(credentials.data()),
                                  static_cast<int>(credentials.size()));
    out.resize(static_cast<std::size_t>(n));
    return "Basic " + out;
}

// A bcrypt entry of cost 12: a quarter of a second or so per check.
std::shared_ptr<const proxy_users> slow_users() {
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    REQUIRE(crypt_gensalt_rn("$2b$", 12, nullptr, 0, salt, sizeof salt));
    struct crypt_data data {};
    auto parsed = proxy_users::parse("crawler:" + std::string(crypt_rn("s3cret", salt, &data, sizeof data)) + "\n");
    REQUIRE(std::holds_alternative<proxy_users>(parsed));
    return std::make_shared<const proxy_users>(std::get<proxy_users>(std::move(parsed)));
}

}  // namespace

TEST_CASE("a check runs off the caller's thread, which goes on meanwhile, and resumes on it") {
    const auto users = slow_users();
    asio::io_context ioc(1);  // outlives the checks' thread, which posts to it
    password_checks checks;
    std::optional<password_checks::result> right, wrong;
    int ticks = 0;
    bool resumed_here = false;
    asio::co_spawn(ioc, [&]() -> task<void> {
        right = co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1");
        wrong = co_await checks.check(users, basic("crawler:guess"), "192.0.2.1");
        resumed_here = ioc.get_executor().running_in_this_thread();
    }, asio::detached);
    // The loop's other work goes on while the hashing runs.
    asio::co_spawn(ioc, [&]() -> task<void> {
        steady_timer t(co_await asio::this_coro::executor);
        while (!wrong) {
            t.expires_after(5ms);
            co_await t.async_wait(use_tuple);
            ++ticks;
        }
    }, asio::detached);
    ioc.run();
    REQUIRE(right);
    REQUIRE(wrong);
    CHECK(right->user == "crawler");
    CHECK_FALSE(right->busy);
    CHECK_FALSE(wrong->user);
    CHECK_FALSE(wrong->busy);
    CHECK(resumed_here);
    CHECK(ticks >= 10);  // two cost-12 checks take far longer than 50 ms
}

TEST_CASE("beyond max_pending a check is busy at once; the count falls when a check ends") {
    const auto users = slow_users();
    asio::io_context ioc(1);
    password_checks checks(1, 16, 30s);
    std::optional<password_checks::result> first, second, third;
    asio::co_spawn(ioc, [&]() -> task<void> { first = co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1"); },
                   asio::detached);
    asio::co_spawn(ioc, [&]() -> task<void> {
        second = co_await checks.check(users, basic("crawler:other"), "192.0.2.1");
        CHECK_FALSE(first);  // answered while the first was still hashing
    }, asio::detached);
    ioc.run();
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->user == "crawler");
    CHECK(second->busy);
    ioc.restart();
    asio::co_spawn(ioc, [&]() -> task<void> { third = co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1"); },
                   asio::detached);
    ioc.run();
    REQUIRE(third);
    CHECK(third->user == "crawler");
}

TEST_CASE("a check that waits longer than max_wait is busy; one whose waiter gave up before it started is skipped") {
    const auto users = slow_users();
    asio::io_context ioc(1);
    password_checks checks(8, 16, 100ms);
    std::optional<password_checks::result> first, second;
    asio::co_spawn(ioc, [&]() -> task<void> { first = co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1"); },
                   asio::detached);
    asio::co_spawn(ioc, [&]() -> task<void> { second = co_await checks.check(users, basic("crawler:other"), "192.0.2.1"); },
                   asio::detached);
    ioc.run();
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->busy);  // a cost-12 hash takes longer than 100 ms
    CHECK(second->busy);
    const auto deadline = clock::now() + 30s;
    while (checks.pending() > 0 && clock::now() < deadline) std::this_thread::sleep_for(10ms);
    CHECK(checks.pending() == 0);  // both places given back
    // The first was hashed to the end (it had started) and is remembered; the second,
    // queued behind it, was never hashed.
    const auto right = users->recall(basic("crawler:s3cret"));
    CHECK((right && right->user == "crawler"));
    CHECK_FALSE(users->recall(basic("crawler:other")));
}

TEST_CASE("many checks of the same new credentials cost one hash: the rest are answered from memory") {
    asio::io_context ioc(1);
    password_checks checks;
    // n checks of the same credentials, all queued before the first is hashed.
    const auto timed = [&](int n) {
        const auto users = slow_users();
        int right = 0;
        for (int i = 0; i < n; ++i)
            asio::co_spawn(ioc, [&]() -> task<void> {
                if ((co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1")).user == "crawler") ++right;
            }, asio::detached);
        const auto start = clock::now();
        ioc.restart();
        ioc.run();
        CHECK(right == n);
        return clock::now() - start;
    };
    const auto one = timed(1);
    const auto twenty = timed(20);
    CHECK(twenty < 3 * one);  // twenty hashes would take twenty times as long
}

TEST_CASE("clients take turns: a guesser's queue delays another client's first check by one hash at most") {
    const auto users = slow_users();
    asio::io_context ioc(1);
    password_checks checks;
    std::vector<std::string> done;  // who was answered, in order
    for (int i = 0; i < 6; ++i)
        asio::co_spawn(ioc, [&, i]() -> task<void> {
            auto r = co_await checks.check(users, basic("crawler:guess" + std::to_string(i)), "198.51.100.66");
            CHECK_FALSE(r.busy);
            done.push_back("guess");
        }, asio::detached);
    asio::co_spawn(ioc, [&]() -> task<void> {
        auto r = co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1");
        CHECK(r.user == "crawler");
        done.push_back("login");
    }, asio::detached);
    ioc.run();
    REQUIRE(done.size() == 7);
    // The guesser's first check may have been hashing already; the login comes next.
    CHECK(std::find(done.begin(), done.end(), "login") - done.begin() <= 1);
}

TEST_CASE("one client holds at most max_per_client places: beyond them it is busy, others are not") {
    const auto users = slow_users();
    asio::io_context ioc(1);
    password_checks checks(256, 2, 30s);
    int busy = 0, judged = 0;
    for (int i = 0; i < 4; ++i)  // the first may be taken off the queue at once: 3 or 2 queued, the rest busy
        asio::co_spawn(ioc, [&, i]() -> task<void> {
            auto r = co_await checks.check(users, basic("crawler:guess" + std::to_string(i)), "198.51.100.66");
            ++(r.busy ? busy : judged);
        }, asio::detached);
    std::optional<password_checks::result> other;
    asio::co_spawn(ioc, [&]() -> task<void> { other = co_await checks.check(users, basic("crawler:s3cret"), "192.0.2.1"); },
                   asio::detached);
    ioc.run();
    CHECK(busy >= 1);
    CHECK(judged >= 2);
    REQUIRE(other);
    CHECK_FALSE(other->busy);
    CHECK(other->user == "crawler");
}
