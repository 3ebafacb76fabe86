#pragma once
// What the proxy sends a parent proxy: a request readdressed in absolute-form with the
// parent's credentials (plain HTTP: h1_origin_transport, the robots.txt fetch), or CONNECT
// host:port (RFC 9110 section 9.3.6), whose answer's header is read as strictly as an
// origin's, for a tunnel (HTTPS requests through exchange/origin_open, the server's
// CONNECT tunnels through server/tunnel).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

struct config;
struct exchange_context;
struct origin_target;
struct parent_config;
class parent_state;

/// Readdresses a request head written for the origin (origin-form) to a parent proxy
/// (RFC 9112 section 3.2.2): its target in absolute-form ("GET http://host:port/path
/// HTTP/1.1"; an OPTIONS "*" becomes the bare "http://host:port"), and the parent's
/// Proxy-Authorization (`authorization`, when it has credentials) as its last field.
/// `head` is one the proxy wrote ("METHOD SP target SP HTTP/1.1 CRLF fields CRLF CRLF");
/// anything else is left as it is.
void readdress_to_parent(std::string& head, const origin_target& target, std::string_view authorization);

/// A connection through a parent that did not open: why (the client's answer), and
/// whether the parent itself failed (its health hears of it, and another parent of the
/// route may carry the request).
struct parent_failure : failure {
    bool parents_own = false;
};

/// Asks the parent connected on `stream` for a tunnel to `authority` ("host:port", IPv6 in
/// brackets) and reads its answer, until `deadline`. nullopt: the tunnel is open. Bytes
/// behind a 2xx before the proxy spoke go to `early` (a server-first protocol's banner, in
/// a spliced tunnel); without `early` (TLS follows) they are the parent's malformed answer.
/// Otherwise why not:
///  - the parent's own failure: origin_closed (it closed without answering),
///    origin_bad_response (a malformed answer: a header over `header_limit`, bad syntax,
///    early bytes where none may come);
///  - origin_connect_timeout: no answer by `deadline` (a parent answers a CONNECT once it
///    reached the origin: a silent one is most often waiting for an unreachable origin,
///    so it is held against neither);
///  - parent_credentials_refused: its 407 (the proxy's configuration is wrong);
///  - origin_refused_by_parent: its 502, 503 or 504, its word about the destination
///    (Squid's 503 when the origin refused it), the destination's to bear;
///  - parent_refused: any other answer but 2xx (its own policy: a 403, a 429).
task<std::optional<parent_failure>> open_parent_tunnel(timed_socket& stream, const parent_config& parent,
                                                       const std::string& authority, std::size_t header_limit,
                                                       clock::time_point deadline, std::string* early = nullptr);

/// Connects `stream` to `parent` (parent_connect_seconds counts it; a connect that fails,
/// or a parent name that does not resolve, is the parent's own failure) and, unless
/// `authority` is empty, opens a tunnel to it there (open_parent_tunnel), all by `deadline`.
task<std::optional<parent_failure>> connect_through(exchange_context& ctx, const config& cfg, timed_socket& stream,
                                                    parent_state& parent, const std::string& authority,
                                                    clock::time_point deadline, std::string* early = nullptr);

}  // namespace politeproxy
