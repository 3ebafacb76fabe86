#pragma once
#include "politeproxy/server/proxy_context.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/request_head.hpp"
#include "politeproxy/http1/wire_fields.hpp"

#include "politeproxy/base/executor.hpp"
#include <boost/beast/core/flat_buffer.hpp>
#include "politeproxy/net/timed_socket.hpp"

namespace politeproxy {

/// Forwards one request whose header has been read to `target` (an absolute-form
/// request's, or an intercepted TLS connection's origin, reached over TLS): parks it at its host's gate, sends it to the origin over a pooled
/// keep-alive connection, and streams both bodies. Answers the client exactly once,
/// either with the origin's response or with one of the proxy's own answers.
/// Returns true when the client connection may carry another request. `cfg` is the
/// config the session read this request under (it outlives the call); `verdict` is
/// check_request_head's (not a refusal): the body is read and forwarded as it says.
task<bool> forward_request(proxy_context& ctx, const config& cfg, timed_socket& client,
                           boost::beast::flat_buffer& buffer,
                           request_header_parser& header, const request_verdict& verdict,
                           const origin_target& target);

}  // namespace politeproxy
