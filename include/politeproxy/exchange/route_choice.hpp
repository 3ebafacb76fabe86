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
/// when a network route comes before any route that names it (route_needs_addresses),
/// and when the way is a parent: a parent reaches the destination by its name, so every
/// address of it must be one the deny list permits (destination_denied otherwise: no
/// parent carries a request the proxy would refuse). A direct way is judged as always,
/// on the address connected to.
/// `tried`: a parent that just failed this request (another is chosen if the route has
/// one). A route with none usable: a way with `all_down` set (the caller answers
/// parents_down with its next-hop and Retry-After).
task<std::variant<way, failure>> choose_way(exchange_context& ctx, const config& cfg, const std::string& key,
                                           const std::optional<ip_bytes>& address, std::uint16_t port,
                                           const parent_state* tried = nullptr);

/// choose_way without a look-up, when none is needed: the destination is an address or a
/// `resolve:` entry, or its route is known from its name and its way is direct. nullopt:
/// choose_way must look the destination up. (No coroutine frame, no allocation: the
/// common case of every request under `routes:`.)
std::optional<std::variant<way, failure>> choose_way_at_once(exchange_context& ctx, const config& cfg,
                                                            const std::string& key,
                                                            const std::optional<ip_bytes>& address,
                                                            std::uint16_t port, const parent_state* tried = nullptr);

/// The ways one request or tunnel may try when parents fail themselves (its first included).
inline constexpr int ways_per_request = 3;

/// After `via`'s parent failed itself (a parent_failure of its own): the route's next usable way
/// replaces `via`, the failed parent counted for this request and its turn given back;
/// false when the route has none.
task<bool> next_way(exchange_context& ctx, const config& cfg, const std::string& key,
                    const std::optional<ip_bytes>& address, std::uint16_t port, errc why, way& via, parent_turn& turn);

}  // namespace politeproxy
