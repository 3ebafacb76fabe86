#pragma once
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <string>
#include <tuple>

namespace politeproxy {

/// The room a connection's writer keeps from one write to the next for the bytes it
/// gathers (an HTTP/2 session's frames): a busy connection's batch grows its room once,
/// not at every batch. Past this, or once no stream is open, the room goes back.
inline constexpr std::size_t kept_write_room = 256 * 1024;

/// After a writer's last write: `room` kept for the next, or given back (above).
inline void settle_write_room(std::string& room, bool streams_open) {
    if (!streams_open || room.capacity() > kept_write_room) std::string().swap(room);
}

/// asio::async_write(out, buffers), except that what the socket takes at once (a whole
/// request or response of a few KiB, nearly always) is sent before the coroutine would
/// suspend: a write that completes at once costs no trip through the event loop. The
/// rest (everything, over TLS) is written as asio::async_write does, under `out`'s deadline.
/// `buffers` must stay valid until the returned task completes.
template <class ConstBufferSequence>
task<std::tuple<boost::system::error_code, std::size_t>> send_all(timed_socket& out, ConstBufferSequence buffers) {
    boost::system::error_code ec;
    const std::size_t now = out.write_now(buffers, ec);
    if (ec || now == boost::asio::buffer_size(buffers)) co_return std::tuple{ec, now};
    boost::beast::buffers_suffix<ConstBufferSequence> rest(buffers);
    rest.consume(now);
    auto [wec, n] = co_await boost::asio::async_write(out, rest, use_tuple);
    co_return std::tuple{wec, now + n};
}

}  // namespace politeproxy
