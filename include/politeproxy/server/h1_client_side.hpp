#pragma once
// The HTTP/1.1 client adapter: one request of an HTTP/1.1 connection (plain, or inside
// intercepted TLS) as the exchange's client side (exchange/client_side.hpp). To an
// HTTP/1.1 origin it relays its bytes itself (relays_http1: the header rewritten in
// place, the bodies passed through as they are framed); to an HTTP/2 origin it gives
// the request as a message.
#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/request_head.hpp"
#include "politeproxy/net/timed_socket.hpp"
#include "politeproxy/server/proxy_context.hpp"

#include <boost/beast/core/flat_buffer.hpp>

namespace politeproxy {

class client_state;

/// Forwards one request whose header has been read and judged at the entry to `target`
/// (an absolute-form request's, or an intercepted TLS connection's origin) through the
/// exchange (forward_to_origin). Answers the client exactly once, with the origin's
/// response or one of the proxy's own answers. True: the client connection may carry
/// another request. `cfg` is the config the session read this request under (it outlives
/// the call); `verdict` is check_request_head's (not a refusal): the body is read and
/// forwarded as it says. `client`: whose request (clients:; null: nobody's).
task<bool> forward_request(proxy_context& ctx, const config& cfg, timed_socket& client,
                           boost::beast::flat_buffer& buffer, request_header_parser& header,
                           const request_verdict& verdict, const origin_target& target,
                           std::shared_ptr<client_state> who);

}  // namespace politeproxy
