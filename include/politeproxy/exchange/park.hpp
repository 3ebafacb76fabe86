#pragma once
#include "politeproxy/http1/answers.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include "politeproxy/base/event.hpp"
#include "politeproxy/base/executor.hpp"
#include <boost/asio/ip/tcp.hpp>
#include "politeproxy/net/timed_socket.hpp"

#include <string>

namespace politeproxy {

struct proxy_context;

/// Parks a request at its host's gate while watching its client: if the client closes
/// or resets its connection while parked, the request leaves the queue (errc::cancelled)
/// and nothing is granted to it.
///
/// The watch only reads with MSG_PEEK, so the request body stays in the socket. Once
/// the client has sent bytes beyond the header (a body, a pipelined request, a TLS
/// close_notify), readiness cannot show a close behind them: the watch then looks at
/// the TCP state every 250 ms (a FIN or a reset is seen within that). A client that half-closes
/// (shutdown(SHUT_WR)) after its request counts as gone, as with Squid's default
/// half_closed_clients off and HAProxy's abortonclose.
///
/// With a fleet store, a request that would not wait locally first tries for its lease
/// in one round trip without the watch (acquire_leased_at_once); it parks only if the
/// fleet refuses.
task<acquire_result> park(host_gates& gates, std::string key, std::string address, tcp_socket& client);

/// The same for a request whose going away `gone` tells (an HTTP/2 stream the client
/// reset, its connection closed): once set, the request leaves the queue.
task<acquire_result> park(host_gates& gates, std::string key, std::string address, event& gone);

/// What admit() decided.
struct admission {
    permit granted;     ///< empty when the request was answered or its client left
    bool keep = false;  ///< without a permit: whether the client connection may go on
};

/// A permit at once when the request would not wait at all (most do), without the
/// parking machinery (the client watch costs a coroutine pair and epoll changes) or a
/// coroutine frame; empty otherwise: then admit().
/// `address` (groups.ip): the address the request connects to; empty: none.
permit admit_at_once(proxy_context& ctx, const std::string& key, const std::string& address);

/// park(), then answers a refusal (queue full, waited too long, shutting down) with
/// 503 and Retry-After, as `mode` says (keep the connection open, a HEAD).
task<admission> admit(proxy_context& ctx, timed_socket& client, std::string key, std::string address,
                      answer_mode mode);

}  // namespace politeproxy
