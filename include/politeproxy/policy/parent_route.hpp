#pragma once
// Which way a destination goes (SPEC.md `routes`): the first route that matches the
// destination, then one of its ways by its `pick`. Sans-io: the parents' health and load
// come in as values (exchange/parent_set keeps them), so the choice is tested without a
// socket.
#include "politeproxy/policy/address_filter.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

/// One entry of `routes:`.
struct parent_route {
    enum class pick_kind : std::uint8_t {
        round_robin,  ///< in turn, each parent as often as its weight
        least_busy,   ///< the fewest requests and tunnels per unit of weight
        by_host,      ///< the same parent for a host key while it is up (rendezvous hashing)
    };
    /// A way in `via` that is no parent: the proxy connects to the destination itself.
    static constexpr std::size_t direct = std::numeric_limits<std::size_t>::max();

    std::vector<std::string> names;     ///< host keys, exact or "*.suffix"
    std::vector<ip_network> networks;   ///< of the destination's address (resolved when a name)
    std::vector<std::size_t> via;       ///< indices into the config's parents, or `direct`
    pick_kind pick = pick_kind::round_robin;
    int line = 0;

    bool matches_name(std::string_view key) const;
    bool matches_address(const ip_bytes& address) const;
    bool operator==(const parent_route&) const = default;
};

/// The first route in `routes` whose names match `key`, or whose networks contain one of
/// `addresses`; nullptr: direct. `addresses` is empty when the destination's addresses
/// are not known (routes_need_addresses says when to look them up).
const parent_route* route_for(std::span<const parent_route> routes, std::string_view key,
                              std::span<const ip_bytes> addresses);

/// Whether the route of `key` (a host name) depends on its addresses: some route that
/// matches by network comes before the first route that names it. Then its addresses are
/// looked up before its route is known; otherwise the route is known from the name.
bool route_needs_addresses(std::span<const parent_route> routes, std::string_view key);

/// What the pick knows of one way of a route at the moment of the choice.
struct way_state {
    bool usable = true;    ///< up (or due to be tried again); `direct` always is
    std::size_t busy = 0;  ///< requests and tunnels it carries now
    std::size_t weight = 1;
    std::string_view name;  ///< the parent's name (by_host hashes it with the host key)
};

/// Picks one of `ways` (a route's via, in order) for `key`: nullopt when none is usable.
/// `turn` is the route's round-robin counter (the caller increments it per pick).
std::optional<std::size_t> pick_way(parent_route::pick_kind pick, std::span<const way_state> ways,
                                    std::string_view key, std::uint64_t turn);

}  // namespace politeproxy
