#pragma once
#include "politeproxy/host_gates.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <string>

namespace politeproxy {

/// Parks a request at its host's gate while watching its client: if the client closes
/// or resets its connection while parked, the request leaves the queue (errc::cancelled)
/// and nothing is granted to it.
///
/// The watch only reads with MSG_PEEK, so the request body stays in the socket. Once
/// the client has sent bytes beyond the header (a body, a pipelined request), a clean
/// close can no longer be seen behind them; only a reset or error is noticed then.
boost::asio::awaitable<acquire_result> park(host_gates& gates, std::string key,
                                            boost::asio::ip::tcp::socket& client);

}  // namespace politeproxy
