#pragma once
#include "politeproxy/server/proxy_context.hpp"

#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/net/timed_socket.hpp"
#include "politeproxy/server/session_set.hpp"

#include <boost/beast/core/flat_buffer.hpp>

#include <string>
#include <string_view>

namespace politeproxy {

/// The first bytes of an HTTP/2 connection with prior knowledge (RFC 9113 section 3.4).
inline constexpr std::string_view h2_preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The origin of an intercepted TLS connection: every request on it goes there.
struct intercepted_origin {
    connect_target target;  ///< the CONNECT's
    std::string name_key;   ///< the key of the name the client asked for (SNI, else the CONNECT host)
    std::string client;     ///< the CONNECT's client (clients:), whose its requests are unless they say
};

/// Serves a client connection that speaks HTTP/2: h2c with prior knowledge on the plain
/// proxy port, or h2 agreed by ALPN inside intercepted TLS (`in_tls`); `buffer` holds
/// what was read of it. Each stream is one request (h2c: `:scheme http` and
/// `:authority` name the origin, as an absolute-form target does; in TLS, `:scheme
/// https` and an `:authority` that is the connection's origin, else 421): checked, parked at its host's gate on its own, and forwarded by
/// forward_to_origin while the connection goes on serving other streams. A stream the
/// client resets, or a connection it closes, takes its parked requests out of the queue.
/// `allowed`: the client's address is in security.allow_clients (else each stream is
/// answered 403). A drain (`registration`) sends GOAWAY: the streams open go on, no
/// new one is taken, and the connection closes when the last is done. Returns when the
/// connection is to close; no stream outlives it.
task<void> serve_h2(proxy_context& ctx, timed_socket& client, boost::beast::flat_buffer& buffer,
                    session_set::handle& registration, bool allowed, const intercepted_origin* in_tls);

}  // namespace politeproxy
