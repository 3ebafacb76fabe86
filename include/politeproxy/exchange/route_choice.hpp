#pragma once
// The way one request or tunnel takes to its destination (SPEC.md `routes`): direct, or
// through a parent proxy, chosen by exchange/parent_set.
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/parent_set.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace politeproxy {

struct config;
struct exchange_context;

/// The way for a request to `key`:`port` (`address` when the key is one) under `cfg`'s
/// routes; without routes, direct at no cost. The destination's addresses are looked up
/// when a route matches by network, and when the way is a parent: a parent reaches the
/// destination by its name, so every address of it must be one the deny list permits
/// (destination_denied otherwise: no parent carries a request the proxy would refuse).
/// `tried`: a parent that just failed this request (another is chosen if the route has
/// one). A route with none usable: a way with `all_down` set (the caller answers
/// parents_down with its next-hop and Retry-After).
task<std::variant<way, failure>> choose_way(exchange_context& ctx, const config& cfg, const std::string& key,
                                           const std::optional<ip_bytes>& address, std::uint16_t port,
                                           const parent_state* tried = nullptr);

/// Whether a failure to open a connection through a parent is the parent's own (it
/// refused, dropped or ignored the connection, or answered malformed): then another way
/// may carry the request. Its word about the destination, and its 407, are not.
bool parents_own_failure(errc why);

/// After `via`'s parent failed itself (parents_own_failure): the route's next usable way
/// replaces `via`, the failed parent counted for this request and its turn given back;
/// false when the route has none.
task<bool> next_way(exchange_context& ctx, const config& cfg, const std::string& key,
                    const std::optional<ip_bytes>& address, std::uint16_t port, errc why, way& via, parent_turn& turn);

}  // namespace politeproxy
