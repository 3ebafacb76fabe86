#pragma once
// A new connection to a request's origin, the one way every exchange opens one: TCP to
// an address the deny list permits (net/origin_connect), then TLS when the target is
// https (the origin's certificate verified before anything is sent; ALPN picks the
// protocol). Through a parent proxy: TCP to the parent; for https a tunnel through it
// (exchange/parent_requests), then the same TLS to the origin inside; for http the
// connection is the parent's (the request goes in absolute-form, h1_origin_transport).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

struct config;
struct exchange_context;
struct origin_target;
class parent_state;

/// What open_origin() made of the connection.
struct origin_opened {
    std::optional<connect_failure> failure;  ///< set: there is no connection
    bool h2 = false;                         ///< the origin speaks HTTP/2 on it
    /// The failure is the parent's own (exchange/parent_requests.hpp: parent_failure):
    /// its health hears of it, and another parent of the route may be tried.
    bool parents_fault = false;
};

/// Connects `origin` to `target` (to `pinned` when it names an address), through `parent`
/// when not null. `offer_h2`: an https origin is offered h2 then http/1.1 (ALPN), and a
/// plain one is spoken to in HTTP/2 with prior knowledge (h2c; never through a parent);
/// otherwise HTTP/1.1 alone. Connecting (with the parent's CONNECT), and then the TLS
/// handshake, each take at most `phase`, and neither runs past `not_after`.
task<origin_opened> open_origin(exchange_context& ctx, const config& cfg, timed_socket& origin,
                                const origin_target& target, const pinned_address& pinned, bool offer_h2,
                                clock::duration phase, clock::time_point not_after = clock::time_point::max(),
                                parent_state* parent = nullptr);

}  // namespace politeproxy
