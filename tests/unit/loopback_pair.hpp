#pragma once
// A connected pair of TCP sockets on 127.0.0.1 for tests of timed_socket: `near` wrapped
// in one, `far` plain, and a bounded run of a coroutine on their loop.
#include "politeproxy/net/timed_socket.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <optional>

namespace politeproxy::testing {

struct connected_pair {
    boost::asio::io_context ioc{1};
    std::optional<timed_socket> near;
    boost::asio::ip::tcp::socket far{ioc};

    connected_pair() {
        using boost::asio::ip::tcp;
        tcp::acceptor acceptor(ioc, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
        tcp_socket s(ioc);
        s.connect(acceptor.local_endpoint());
        far = acceptor.accept();
        near.emplace(std::move(s));
    }

    // Runs `body` to completion (bounded: the io_context stops after 2 s regardless).
    template <class F>
    void run(F body) {
        boost::asio::steady_timer guard(ioc, std::chrono::seconds(2));
        guard.async_wait([this](boost::system::error_code ec) {
            if (!ec) ioc.stop();
        });
        boost::asio::co_spawn(ioc, [&]() -> task<void> {
            co_await body();
            guard.cancel();
        }, boost::asio::detached);
        ioc.run();
    }
};

inline task<void> pause(clock::duration d) {
    steady_timer t(co_await boost::asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
}

// One trip through the loop: what a read's or the watch's attempt at once found is
// reported by then.
inline task<void> through_the_loop() {
    co_await boost::asio::post(co_await boost::asio::this_coro::executor, boost::asio::deferred);
}

}  // namespace politeproxy::testing
