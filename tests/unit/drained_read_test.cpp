// Reads that mark an emptied socket (net/drained_read.hpp), on a real loopback
// connection: a read that empties the socket marks it, one that leaves bytes or a FIN
// behind does not; the next read, or the watch, still gets what comes later, and a FIN
// or a reset that came before it at once, unless a write since would have failed on it.
// Deadlines are one second; every test stops by itself within two.
#include "politeproxy/net/timed_socket.hpp"
#include "politeproxy/net/send_all.hpp"
#include "loopback_pair.hpp"

#include <boost/asio/write.hpp>

#include <doctest/doctest.h>

#include <array>
#include <string>
#include <tuple>

using namespace politeproxy;
using namespace politeproxy::testing;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// `far` resets the connection when it closes.
void reset(asio::ip::tcp::socket& far) {
    far.set_option(asio::socket_base::linger(true, 0));
    far.close();
}

// `far` sends `bytes` and resets the connection: both wait in `near`'s receive queue.
task<void> send_then_reset(connected_pair& p, std::string_view bytes) {
    asio::write(p.far, asio::buffer(bytes));
    reset(p.far);
    co_await pause(20ms);
}

// The bytes of a first read, whether it emptied the socket, and what the next one got
// and how long it took.
struct two_reads {
    std::string first;
    bool emptied = false;
    boost::system::error_code second;
    clock::duration took{};
};

// Reads what waits on `p.near`, awaits `between()`, then times the next read.
template <class Between>
task<void> read_then_time_next(connected_pair& p, two_reads& r, Between between) {
    std::array<char, 64> buf;
    p.near->expires_after(1s);
    auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
    if (!ec) r.first.assign(buf.data(), n);
    r.emptied = p.near->read_emptied();
    co_await between();
    const auto start = clock::now();
    std::tie(ec, n) = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
    r.second = ec;
    r.took = clock::now() - start;
}

task<void> nothing() { co_return; }

}  // namespace

TEST_CASE("a read that empties the socket marks it; one that leaves bytes or a FIN behind does not") {
    connected_pair p;
    bool left_bytes = true, emptied = false, before_fin = true;
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("0123456789")));
        co_await pause(20ms);
        std::array<char, 4> small;
        std::array<char, 64> buf;
        p.near->expires_after(1s);
        co_await p.near->async_read_some(asio::buffer(small), use_tuple);
        left_bytes = p.near->read_emptied();
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        emptied = p.near->read_emptied();
        asio::write(p.far, asio::buffer(std::string_view("last")));
        p.far.shutdown(asio::socket_base::shutdown_send);
        co_await pause(20ms);
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        before_fin = p.near->read_emptied();
    });
    CHECK_FALSE(left_bytes);
    CHECK(emptied);
    CHECK_FALSE(before_fin);
}

TEST_CASE("after a write, the next read waits for bytes that come later and gets them") {
    connected_pair p;
    std::string first, second;
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("first")));
        std::array<char, 64> buf;
        p.near->expires_after(1s);
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        if (!ec) first.assign(buf.data(), n);
        co_await send_all(*p.near, asio::buffer(std::string_view("answer")));  // the mark is trusted now
        steady_timer later(co_await asio::this_coro::executor, 20ms);
        later.async_wait([&](boost::system::error_code) { asio::write(p.far, asio::buffer(std::string_view("second"))); });
        std::tie(ec, n) = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        if (!ec) second.assign(buf.data(), n);
    });
    CHECK(first == "first");
    CHECK(second == "second");
}

TEST_CASE("with no write since, a read attempted at once that finds nothing waits for bytes that come later") {
    // timed_socket attempts it, then spares the reactor's attempt: the reactor must still
    // read when readiness comes.
    connected_pair p;
    std::string second;
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("first")));
        std::array<char, 64> buf;
        p.near->expires_after(1s);
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        steady_timer later(co_await asio::this_coro::executor, 20ms);
        later.async_wait([&](boost::system::error_code) { asio::write(p.far, asio::buffer(std::string_view("second"))); });
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        if (!ec) second.assign(buf.data(), n);
    });
    CHECK(second == "second");
}

TEST_CASE("bytes that come between the emptying read and its handler are read at once by the next read") {
    // Their readiness, taken by the loop after the first read's handler ran, clears the mark.
    connected_pair p;
    std::string second;
    bool first_done = false;
    clock::duration took{};
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("first")));
        co_await pause(20ms);  // its readiness taken: the read below is attempted at once
        std::array<char, 64> buf;
        p.near->expires_after(1s);
        p.near->async_read_some(asio::buffer(buf), [&](boost::system::error_code, std::size_t) { first_done = true; });
        asio::write(p.far, asio::buffer(std::string_view("second")));
        co_await pause(20ms);
        co_await send_all(*p.near, asio::buffer(std::string_view("answer")));  // the mark is trusted now
        const auto start = clock::now();
        auto [ec, n] = co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        if (!ec) second.assign(buf.data(), n);
        took = clock::now() - start;
    });
    CHECK(first_done);
    CHECK(second == "second");
    CHECK(took < 200ms);
}

TEST_CASE("a read that ended just before a FIN: the next read gets the end of stream at once") {
    // The read emptied the socket of bytes but not of the FIN, whose readiness is spent:
    // TCP_INQ counts it, so the socket is not marked. (A read's length alone cannot tell.)
    connected_pair p;
    two_reads r;
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("last")));
        p.far.shutdown(asio::socket_base::shutdown_send);  // half-closed: it still takes the answer
        co_await pause(20ms);
        co_await read_then_time_next(p, r, [&]() { return send_all(*p.near, asio::buffer(std::string_view("answer"))); });
    });
    CHECK(r.first == "last");
    CHECK(r.second == asio::error::eof);
    CHECK(r.took < 200ms);
}

TEST_CASE("a reset that came before the read that emptied the socket fails the next read at once") {
    // TCP_INQ does not count a reset: with nothing written since, timed_socket attempts
    // the next read itself.
    connected_pair p;
    two_reads r;
    p.run([&]() -> task<void> {
        co_await send_then_reset(p, "partial");
        co_await read_then_time_next(p, r, nothing);
    });
    CHECK(r.first == "partial");
    CHECK(r.second == asio::error::connection_reset);
    CHECK(r.took < 200ms);
}

TEST_CASE("a pooled connection reset before the read that emptied it: the watch misses it, the write fails") {
    // What README's hostile-input table says of the watch: the request is then sent
    // again on a new connection when it may be, and answered 502 otherwise.
    connected_pair p;
    bool heard = true;
    boost::system::error_code wrote;
    p.run([&]() -> task<void> {
        co_await send_then_reset(p, "response");
        std::array<char, 64> buf;
        p.near->expires_after(1s);
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        p.near->watch();
        co_await through_the_loop();
        heard = p.near->heard();
        std::tie(wrote, std::ignore) = co_await send_all(*p.near, asio::buffer(std::string_view("request")));
        p.near->socket().close();  // the watch would wait for readiness that never comes, as the pool closes it
    });
    CHECK_FALSE(heard);
    CHECK(wrote);
}

TEST_CASE("after a read that emptied the socket, the watch hears bytes and a close that come later") {
    connected_pair p;
    bool heard_before = true, heard_bytes = false, heard_close = false;
    p.run([&]() -> task<void> {
        asio::write(p.far, asio::buffer(std::string_view("response")));
        std::array<char, 64> buf;
        p.near->expires_after(1s);
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
        p.near->watch();  // as a pooled connection is watched when it is taken again
        co_await through_the_loop();
        heard_before = p.near->heard();
        asio::write(p.far, asio::buffer(std::string_view("stray")));
        co_await pause(20ms);
        heard_bytes = p.near->heard();
        co_await p.near->async_read_some(asio::buffer(buf), use_tuple);  // takes the stray bytes, ends the watch
        p.near->watch();
        p.far.close();
        co_await pause(20ms);
        heard_close = p.near->heard_close();
    });
    CHECK_FALSE(heard_before);
    CHECK(heard_bytes);
    CHECK(heard_close);
}

TEST_CASE("read_unmarked: reads mark nothing, and the first after an emptying read still finds a reset") {
    bool marked = true;
    {
        connected_pair p;
        p.run([&]() -> task<void> {
            p.near->read_unmarked();  // as an HTTP/2 session takes the connection over
            asio::write(p.far, asio::buffer(std::string_view("frames")));
            std::array<char, 64> buf;
            p.near->expires_after(1s);
            co_await p.near->async_read_some(asio::buffer(buf), use_tuple);
            marked = p.near->read_emptied();
        });
    }
    two_reads r;
    {
        connected_pair p;
        p.run([&]() -> task<void> {
            co_await send_then_reset(p, "preface");
            co_await read_then_time_next(p, r, [&]() {
                p.near->read_unmarked();
                return nothing();
            });
        });
    }
    CHECK_FALSE(marked);
    CHECK(r.emptied);
    CHECK(r.second == asio::error::connection_reset);
    CHECK(r.took < 200ms);
}
