#pragma once
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace politeproxy {

/// Every session, socket and timer of the proxy lives on one worker's io_context, so
/// they all name its executor type rather than asio::any_io_executor: a type-erased
/// executor costs a copy (and work counting) at every operation a session starts.
using executor = boost::asio::io_context::executor_type;

/// A coroutine running on a worker.
template <class T>
using task = boost::asio::awaitable<T, executor>;

using tcp_socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, executor>;
using tcp_acceptor = boost::asio::basic_socket_acceptor<boost::asio::ip::tcp, executor>;
using steady_timer = boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                                       boost::asio::wait_traits<std::chrono::steady_clock>, executor>;

/// Expected network events are values: `auto [ec, n] = co_await op(..., use_tuple);`.
/// A deferred operation, awaited as it is: no coroutine frame of its own per
/// operation, as use_awaitable would start.
inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::deferred);

}  // namespace politeproxy
