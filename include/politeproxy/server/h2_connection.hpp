#pragma once
#include "politeproxy/server/proxy_context.hpp"

#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/beast/core/flat_buffer.hpp>

#include <string_view>

namespace politeproxy {

/// The first bytes of an HTTP/2 connection with prior knowledge (RFC 9113 section 3.4).
inline constexpr std::string_view h2_preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves a client connection that speaks HTTP/2: h2c with prior knowledge on the plain
/// proxy port, `buffer` holding what was read of it (the preface first). Each stream is
/// one request (`:scheme http` and `:authority` name the origin, as an absolute-form
/// target does): checked, parked at its host's gate on its own, and forwarded by
/// forward_to_origin while the connection goes on serving other streams. A stream the
/// client resets, or a connection it closes, takes its parked requests out of the queue.
/// `allowed`: the client's address is in security.allow_clients (else each stream is
/// answered 403). Returns when the connection is to close; no stream outlives it.
task<void> serve_h2(proxy_context& ctx, timed_socket& client, boost::beast::flat_buffer& buffer, bool allowed);

}  // namespace politeproxy
