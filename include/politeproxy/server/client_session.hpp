#pragma once
#include "politeproxy/server/proxy_context.hpp"

#include "politeproxy/base/executor.hpp"
#include <boost/asio/ip/tcp.hpp>

namespace politeproxy {

/// Serves one client connection: reads requests one after another (keep-alive),
/// forwards absolute-form requests, opens CONNECT tunnels, and answers bad input per
/// SPEC.md. Every accepted request gets exactly one response. The coroutine owns the
/// socket; run it on a worker (a single-threaded io_context): its operations are not
/// synchronised with each other.
task<void> run_client_session(proxy_context& ctx, tcp_socket socket);

}  // namespace politeproxy
