#pragma once
// What the proxy decides from a client request's header alone, before the request is
// parked: refuse it (and how), or how its body is framed and what the forwarded header
// changes. One function, so the HTTP/1.1 request path and its fuzz target see the same
// rules.
#include "politeproxy/config/config.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/wire_fields.hpp"
#include "politeproxy/policy/entry_rules.hpp"

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>

#include <optional>
#include <string>

namespace politeproxy {

/// The header of a client's request, read before anything else is decided.
using request_header_parser = boost::beast::http::request_parser<boost::beast::http::empty_body, wire_allocator>;

/// The methods the proxy forwards, for `Allow` (TRACE is refused with 405).
inline constexpr std::string_view forwarded_methods = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH, CONNECT";

/// What the entry rules decided (a refusal: answer it and close the connection; OPTIONS
/// answered by the proxy; the Max-Forwards to forward), and how the body is framed.
struct request_verdict : entry_verdict {
    body_framing body;            ///< how the request's body arrives (and is forwarded)
    bool framing_fields = false;  ///< it had Transfer-Encoding or Content-Length lines (to remove)

    bool has_body() const { return body.kind == body_kind::chunked || body.length > 0; }
};

/// The answer to a request head the parser refused with `ec`, judged from the bytes it
/// was refused on (`seen`: from the start line on, or from the fields once the parser has
/// taken the start line, `start_line_read`): request_line_too_long when the header is over
/// its limit and its first line alone is over limits.request_line_bytes; header_too_large for the
/// rest of the oversized headers; version_not_supported for a well-formed version other
/// than 1.0 and 1.1 ("HTTP/2.0", which the parser refuses as bad_version); otherwise
/// bad_request, naming the parser's error.
using head_refusal = failure;
head_refusal refuse_unparsed_head(boost::system::error_code ec, std::string_view seen, bool start_line_read,
                                  const limits_config& limits);

/// Checks, in order (the parser has accepted only HTTP/1.0 and 1.1): request line length
/// (limits.request_line_bytes, request_line_too_long), exactly one Host (none allowed in
/// HTTP/1.0 and on CONNECT), the body framing (framing_reader; a CONNECT has no body),
/// then the rules every protocol's requests meet (policy/entry_rules.hpp: TRACE,
/// Max-Forwards on OPTIONS, the field count, CONNECT where it opens no tunnel).
/// `tunnels`: a CONNECT opens a tunnel on this connection (not inside intercepted TLS).
request_verdict check_request_head(const boost::beast::http::request_header<wire_fields>& req,
                                   const limits_config& limits, bool tunnels = true);

}  // namespace politeproxy
