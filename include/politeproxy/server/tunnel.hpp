#pragma once
#include "politeproxy/http1/request_head.hpp"
#include "politeproxy/server/proxy_context.hpp"
#include "politeproxy/http1/origin_target.hpp"

#include <memory>
#include <optional>
#include <string_view>

#include "politeproxy/base/executor.hpp"
#include <boost/beast/core/flat_buffer.hpp>
#include "politeproxy/net/timed_socket.hpp"

namespace politeproxy {

class client_state;

/// Serves a CONNECT whose header has been read and whose `target` the entry judged
/// (server/entry_target.hpp: parsed, its port allowed, its destination). Tunnel mode: opens a tunnel that holds
/// one slot of its host's gate while it is open, forwards half-close both ways, and
/// closes after timeouts.idle without traffic; the client connection ends with it.
/// When the CONNECT is to be intercepted instead (tls.mode intercept, the host not in
/// tls.intercept_exclude), returns its target once every check passed, with nothing
/// answered yet. `cfg` is the config the session read this request under; `who`: whose
/// tunnel (clients:; null: nobody's), a request of its client while it is open.
task<std::optional<connect_target>> run_tunnel(proxy_context& ctx, const config& cfg, timed_socket& client,
                                               boost::beast::flat_buffer& buffer, request_header_parser& header,
                                               const connect_target& target, const std::shared_ptr<client_state>& who);

/// The answer to a CONNECT that is served: "200 Connection established".
extern const std::string_view connect_established;

}  // namespace politeproxy
