#pragma once
#include "politeproxy/proxy_context.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace politeproxy {

/// Serves one client connection: reads requests one after another (keep-alive),
/// forwards absolute-form requests, opens CONNECT tunnels, and answers bad input per
/// SPEC.md. Every accepted request gets exactly one response. The coroutine owns the
/// socket; run it on a single-threaded executor (or a strand): its operations are not
/// synchronised with each other.
boost::asio::awaitable<void> run_client_session(proxy_context& ctx, boost::asio::ip::tcp::socket socket);

}  // namespace politeproxy
