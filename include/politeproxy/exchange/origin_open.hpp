#pragma once
// A new connection to a request's origin, the one way every exchange opens one: TCP to
// an address the deny list permits (net/origin_connect), then TLS when the target is
// https (the origin's certificate verified before anything is sent; ALPN picks the
// protocol).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <optional>

namespace politeproxy {

struct config;
struct exchange_context;
struct origin_target;

/// What open_origin() made of the connection.
struct origin_opened {
    std::optional<connect_failure> failure;  ///< set: there is no connection
    bool h2 = false;                         ///< the origin speaks HTTP/2 on it
};

/// Connects `origin` to `target` (to `pinned` when it names an address). `offer_h2`: an
/// https origin is offered h2 then http/1.1 (ALPN), and a plain one is spoken to in HTTP/2
/// with prior knowledge (h2c); otherwise HTTP/1.1 alone. Connecting, and then the TLS
/// handshake, each take at most `phase`, and neither runs past `not_after`.
task<origin_opened> open_origin(exchange_context& ctx, const config& cfg, timed_socket& origin,
                                const origin_target& target, const pinned_address& pinned, bool offer_h2,
                                clock::duration phase, clock::time_point not_after = clock::time_point::max());

}  // namespace politeproxy
