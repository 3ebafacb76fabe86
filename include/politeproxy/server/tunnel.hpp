#pragma once
#include "politeproxy/http1/forward.hpp"

#include "politeproxy/base/executor.hpp"
#include <boost/beast/core/flat_buffer.hpp>
#include "politeproxy/net/timed_socket.hpp"

namespace politeproxy {

/// Opens a CONNECT tunnel for a request whose header has been read. The tunnel holds one
/// slot of its host's gate while it is open, forwards half-close both ways, and closes
/// after timeouts.idle without traffic. The client connection ends with it. `cfg` is
/// the config the session read this request under (it outlives the call).
task<void> run_tunnel(proxy_context& ctx, const config& cfg, timed_socket& client,
                      boost::beast::flat_buffer& buffer, request_header_parser& header);

}  // namespace politeproxy
