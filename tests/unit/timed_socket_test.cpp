// timed_socket on a real loopback connection: deadlines end pending operations with
// beast::error::timeout, a deadline pushed forward does not, and a deadline that passes
// while none of its operations is pending leaves other waits on the socket alone.
// send_all writes what the socket takes at once, and the rest as the peer reads it.
// watch() hears bytes or a close that wait, and a read started while it is queued ends it.
// Deadlines are tens of milliseconds; every test stops by itself within a second.
#include "politeproxy/net/timed_socket.hpp"
#include "politeproxy/net/send_all.hpp"
#include "politeproxy/base/executor.hpp"
#include "loopback_pair.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <string>
#include <tuple>

using namespace politeproxy;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using namespace politeproxy::testing;


TEST_CASE("a read pending at its deadline ends with timeout") {
    connected_pair p;
    boost::system::error_code got;
    clock::duration took{};
    p.run([&]() -> task<void> {
        std::array<char, 16> buf;
        const auto start = clock::now();
        p.near->expires_after(50ms);
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        got = ec;
        took = clock::now() - start;
    });
    CHECK(got == boost::beast::error::timeout);
    CHECK(took >= 50ms);
    CHECK(took < 1s);
}

TEST_CASE("keep_open_on_timeout: the read times out, and the connection still carries an answer") {
    connected_pair p;
    p.near->keep_open_on_timeout();
    boost::system::error_code read_ec, write_ec;
    std::array<char, 16> got{};
    std::size_t received = 0;
    p.run([&]() -> task<void> {
        std::array<char, 16> buf;
        p.near->expires_after(50ms);
        std::tie(read_ec, std::ignore) = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        p.near->expires_after(1s);
        std::tie(write_ec, std::ignore) = co_await asio::async_write(*p.near, asio::buffer("408", 3), use_tuple);
        std::tie(std::ignore, received) = co_await p.far.async_read_some(asio::buffer(got), use_tuple);
    });
    CHECK(read_ec == boost::beast::error::timeout);
    CHECK_FALSE(write_ec);
    CHECK(std::string_view(got.data(), received) == "408");
}

TEST_CASE("a deadline pushed forward before each read does not expire") {
    connected_pair p;
    int reads = 0;
    boost::system::error_code last;
    p.run([&]() -> task<void> {
        // The far end writes a byte every 20 ms for 200 ms; each read gets 60 ms.
        asio::co_spawn(p.ioc, [&]() -> task<void> {
            for (int i = 0; i < 10; ++i) {
                co_await pause(20ms);
                co_await asio::async_write(p.far, asio::buffer("x", 1), use_tuple);
            }
        }, asio::detached);
        std::array<char, 16> buf;
        while (reads < 10) {
            p.near->expires_after(60ms);
            auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
            last = ec;
            if (ec) break;
            reads += static_cast<int>(n);
        }
    });
    CHECK(!last);
    CHECK(reads == 10);
}

// A read pending under `initial` (a far deadline, or none) when, 10 ms in, the deadline
// is set to 40 ms from then: it times out then. Returns how long the read took.
clock::duration read_with_deadline_moved(std::optional<clock::duration> initial, boost::system::error_code& got) {
    connected_pair p;
    clock::duration took{};
    p.run([&]() -> task<void> {
        const auto start = clock::now();
        asio::co_spawn(p.ioc, [&]() -> task<void> {
            co_await pause(10ms);
            p.near->expires_after(40ms);
        }, asio::detached);
        std::array<char, 16> buf;
        if (initial)
            p.near->expires_after(*initial);
        else
            p.near->expires_never();
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        got = ec;
        took = clock::now() - start;
    });
    return took;
}

TEST_CASE("a deadline brought closer while a read is pending takes effect") {
    boost::system::error_code got;
    const auto took = read_with_deadline_moved(10s, got);
    CHECK(got == boost::beast::error::timeout);
    CHECK(took >= 50ms);
    CHECK(took < 1s);
}

TEST_CASE("a deadline set while a read without one is pending takes effect") {
    boost::system::error_code got;  // the connection went idle: from then on it is timed
    const auto took = read_with_deadline_moved(std::nullopt, got);
    CHECK(got == boost::beast::error::timeout);
    CHECK(took >= 50ms);
    CHECK(took < 1s);
}

TEST_CASE("a read started after the deadline passed times out at once") {
    connected_pair p;
    boost::system::error_code got;
    p.run([&]() -> task<void> {
        p.near->expires_after(10ms);
        co_await pause(30ms);
        std::array<char, 16> buf;
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        got = ec;
    });
    CHECK(got == boost::beast::error::timeout);
}

TEST_CASE("a passing deadline leaves a plain wait on the socket alone") {
    connected_pair p;
    boost::system::error_code wait_ec = asio::error::would_block;
    p.run([&]() -> task<void> {
        std::array<char, 1> buf;
        // One timed read completes (the far end writes), which arms the watchdog.
        co_await asio::async_write(p.far, asio::buffer("x", 1), use_tuple);
        p.near->expires_after(30ms);
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        // Then a readiness wait (how a parked request watches its client) outlives the
        // deadline; the far end writes after it has passed.
        asio::co_spawn(p.ioc, [&]() -> task<void> {
            co_await pause(80ms);
            co_await asio::async_write(p.far, asio::buffer("y", 1), use_tuple);
        }, asio::detached);
        auto [ec] = co_await p.near->socket().async_wait(tcp::socket::wait_read, use_tuple);
        wait_ec = ec;
    });
    CHECK(!wait_ec);
}

TEST_CASE("expires_never: no deadline") {
    connected_pair p;
    boost::system::error_code got = asio::error::would_block;
    p.run([&]() -> task<void> {
        asio::co_spawn(p.ioc, [&]() -> task<void> {
            co_await pause(60ms);
            co_await asio::async_write(p.far, asio::buffer("z", 1), use_tuple);
        }, asio::detached);
        std::array<char, 1> buf;
        p.near->expires_after(20ms);
        p.near->expires_never();
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        got = ec;
    });
    CHECK(!got);
}

TEST_CASE("send_all: what the socket takes at once, then the rest as the peer reads it") {
    connected_pair p;
    const std::string small(1000, 's');
    const std::string big(8 * 1024 * 1024, 'b');  // far more than a socket's send buffer
    std::size_t sent_small = 0, sent_big = 0, received = 0;
    boost::system::error_code ec_small, ec_big;
    p.run([&]() -> task<void> {
        std::tie(ec_small, sent_small) = co_await send_all(*p.near, asio::buffer(small));
        asio::co_spawn(p.ioc, [&]() -> task<void> {  // the peer reads everything
            std::array<char, 65536> buf;
            while (received < small.size() + big.size()) {
                auto [ec, n] = co_await p.far.async_read_some(asio::buffer(buf), use_tuple);
                if (ec) break;
                received += n;
            }
        }, asio::detached);
        p.near->expires_after(1500ms);
        std::tie(ec_big, sent_big) = co_await send_all(*p.near, asio::buffer(big));
        while (received < small.size() + big.size()) co_await pause(1ms);
    });
    CHECK(!ec_small);
    CHECK(sent_small == small.size());
    CHECK(!ec_big);
    CHECK(sent_big == big.size());
    CHECK(received == small.size() + big.size());
}

TEST_CASE("send_all to a peer that reset the connection fails") {
    connected_pair p;
    boost::system::error_code got;
    p.run([&]() -> task<void> {
        p.far.set_option(asio::socket_base::linger(true, 0));
        p.far.close();  // RST
        co_await pause(20ms);
        std::tie(got, std::ignore) = co_await send_all(*p.near, asio::buffer("x", 1));
    });
    CHECK(got);
}

// watch(): the reuse check of a pooled origin connection (forward_to_origin.hpp; what it
// heard is read in h1_origin_transport.hpp). What its first attempt finds is reported after one
// trip through the loop.

TEST_CASE("watch: bytes that arrived while idle are heard, and left unread") {
    connected_pair p;
    std::string read;
    bool heard = false, closed = true;
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("stray")));
        co_await pause(20ms);
        p.near->watch();
        co_await through_the_loop();
        heard = p.near->heard();
        closed = p.near->heard_close();
        std::array<char, 16> buf;
        p.near->expires_after(500ms);
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        if (!ec) read.assign(buf.data(), n);
    });
    CHECK(heard);
    CHECK_FALSE(closed);
    CHECK(read == "stray");
}

TEST_CASE("watch: nothing waiting; a read started while it is queued gets the answer, unheard") {
    connected_pair p;
    std::string read;
    bool heard_before = true, heard_after = true;
    p.run([&]() -> task<void> {
        p.near->watch();
        co_await through_the_loop();
        heard_before = p.near->heard();
        steady_timer later(co_await asio::this_coro::executor, 20ms);  // the answer, once the read waits
        later.async_wait([&](boost::system::error_code) { asio::write(p.far, asio::buffer(std::string_view("answer"))); });
        std::array<char, 16> buf;
        p.near->expires_after(500ms);
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        if (!ec) read.assign(buf.data(), n);
        heard_after = p.near->heard();
    });
    CHECK_FALSE(heard_before);
    CHECK(read == "answer");
    CHECK_FALSE(heard_after);
}

TEST_CASE("watch: a close already waiting is heard at once") {
    connected_pair p;
    bool heard = false, closed = false;
    p.run([&]() -> task<void> {
        p.far.close();
        co_await pause(20ms);
        p.near->watch();
        co_await through_the_loop();
        heard = p.near->heard();
        closed = p.near->heard_close();
    });
    CHECK(heard);
    CHECK(closed);
}

TEST_CASE("watch: a close heard while it is queued fails the next read at once, not at its deadline") {
    // Asio attempts no read after one that found the close, and no readiness follows it:
    // without the watch closing the connection, this read would wait out its second.
    connected_pair p;
    boost::system::error_code got;
    clock::duration took{};
    bool closed = false;
    p.run([&]() -> task<void> {
        p.near->watch();
        co_await through_the_loop();
        p.far.close();
        co_await pause(50ms);
        closed = p.near->heard_close();
        std::array<char, 16> buf;
        const auto start = clock::now();
        p.near->expires_after(1s);
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        got = ec;
        took = clock::now() - start;
    });
    CHECK(closed);
    CHECK(got);
    CHECK(took < 200ms);
}
