#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <span>
#include <variant>

namespace politeproxy {

class metrics;

/// Connects to one of `endpoints` (in the order to try them: dns_cache's, families
/// alternating), Happy Eyeballs v2 style (RFC 8305 section 5): the first attempt at once,
/// each next one `attempt_delay` after the one before or as soon as an attempt fails,
/// several under way at once; the first to connect wins and the others are closed.
/// Every address is tried before it fails: the last attempt's error, or timed_out at
/// `deadline`. Each attempt is counted in connect_attempts_total{family,result}.
/// A broken route (packets dropped: an IPv6 address without IPv6 connectivity) then
/// costs `attempt_delay`, not the connect timeout.
task<std::variant<boost::system::error_code, tcp_socket>> connect_first(
    std::span<const boost::asio::ip::tcp::endpoint> endpoints, clock::duration attempt_delay,
    clock::time_point deadline, metrics& m);

}  // namespace politeproxy
