#pragma once
// One error vocabulary for politeproxy.
#include "politeproxy/base/clock.hpp"

#include <boost/system/error_code.hpp>

#include <optional>
#include <string>

namespace politeproxy {

enum class errc {
    /// The host's queue already holds queue.max_waiting parked requests.
    queue_full = 1,
    /// The request stayed parked longer than queue.max_wait.
    queue_timeout,
    /// The proxy is shutting down: parked requests are answered, not forwarded.
    shutting_down,
    /// The waiter was cancelled (client gone, shutdown) before it was granted.
    cancelled,
    /// The request line, target or headers could not be understood.
    bad_request,
    /// The request target's host is not a valid host name or address.
    bad_host,
    /// The request's header section is larger than limits.request_header_bytes, or has
    /// more field lines than limits.request_header_fields.
    header_too_large,
    /// The request line is longer than limits.request_line_bytes.
    request_line_too_long,
    /// The request's body framing is refused: Transfer-Encoding whose final coding is not
    /// chunked, an invalid Content-Length, both, or a malformed chunked body.
    bad_framing,
    /// The request names a transfer coding other than chunked.
    unsupported_transfer_coding,
    /// The request's HTTP version is not 1.0 or 1.1.
    version_not_supported,
    /// The method is not forwarded (TRACE).
    method_not_allowed,
    /// The client stopped sending its request (header or body) before it was complete.
    request_timeout,
    /// The request's scheme is not one the proxy forwards.
    unsupported_scheme,
    /// An origin-form request was sent to the proxy port.
    origin_form_request,
    /// The client's address is not in security.allow_clients.
    client_denied,
    /// security.users_file is set and the request's Proxy-Authorization is missing or wrong.
    proxy_auth_required,
    /// The destination address is denied by security.deny_destinations.
    destination_denied,
    /// CONNECT to a port not in security.connect_ports.
    connect_port_denied,
    /// The proxy's own Via entry came back: a forwarding loop.
    loop_detected,
    /// The origin's name did not resolve.
    dns_failure,
    /// The origin's name did not resolve within timeouts.connect.
    dns_timeout,
    /// The origin refused the connection.
    origin_refused,
    /// The origin closed or reset the connection before its response was complete.
    origin_closed,
    /// The connection to the origin was not established within timeouts.connect.
    origin_connect_timeout,
    /// No response headers within timeouts.response_headers.
    origin_response_timeout,
    /// The origin's response could not be parsed.
    origin_bad_response,
    /// The origin's TLS certificate did not verify (untrusted, expired, another name).
    tls_certificate_error,
    /// The TLS handshake with the origin failed for another reason (reset, no common
    /// protocol or cipher, not TLS at all).
    tls_protocol_error,
    /// A request inside an intercepted TLS connection names another host than the
    /// connection's.
    misdirected_request,
    /// The fleet store did not answer (unreachable, or slower than fleet.timeout).
    fleet_unavailable,
    /// New proxy credentials could not be checked: too many wait for password hashing.
    auth_checks_busy,
    /// limits.max_parked requests are parked already, across all hosts.
    parked_full,
    /// limits.max_client_connections client connections are open already.
    client_connections_full,
    /// A parent proxy answered a CONNECT for the destination with an error (its 5xx: it
    /// could not reach the origin). Counted against the destination, not the parent.
    origin_refused_by_parent,
    /// A parent proxy refused the proxy's own credentials (407): a configuration error.
    parent_credentials_refused,
    /// A parent proxy answered a CONNECT with a status other than 2xx, 407, 502, 503 or
    /// 504 (its own policy: an ACL's 403, a rate limit's 429): neither the parent's
    /// failure nor the destination's.
    parent_refused,
    /// Every parent of the request's route is down.
    parents_down,
    /// robots.disallow: enforce, and the origin's robots.txt disallows the path.
    robots_disallowed,
    /// robots.txt could not be read (5xx, 429, a timeout, unreachable): a complete
    /// disallow for now (RFC 9309 2.3.1.4), until a later fetch reads it.
    robots_unreachable,
    /// The request's client has clients.max_waiting requests waiting across all hosts.
    client_queue_full,
};

const boost::system::error_category& politeproxy_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), politeproxy_category()};
}

/// The shape every layer's "no" takes: why (the errc a client's answer is chosen by and
/// counted under) and the details its answer gives (Proxy-Status). Each layer names it
/// for what it refuses (connect_failure, handshake_failure, head_refusal, entry_refusal).
struct failure {
    errc why{};
    std::string details;
};

/// A refusal the client may try again after: admission's (queue_full, queue_timeout,
/// shutting_down, fleet_unavailable; cancelled: the client left) and the credentials
/// check's (auth_checks_busy), with the hint for the answer's Retry-After.
struct refusal : failure {
    std::optional<clock::duration> retry_after;
};

}  // namespace politeproxy

template <>
struct boost::system::is_error_code_enum<politeproxy::errc> : std::true_type {};
