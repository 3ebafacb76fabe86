#include "politeproxy/exchange/route_choice.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/net/origin_connect.hpp"

#include <algorithm>

namespace politeproxy {

std::optional<std::variant<way, failure>> choose_way_at_once(exchange_context& ctx, const config& cfg,
                                                            const std::string& key,
                                                            const std::optional<ip_bytes>& address,
                                                            std::uint16_t port, const parent_state* tried) {
    if (cfg.routes.empty()) return way{};
    std::optional<ip_bytes> known = address;
    if (const resolve_entry* entry = known ? nullptr : cfg.static_entry(key)) known = entry->bytes;
    if (!known) {
        // A name: its route from the name alone, and it must not name a parent (one that
        // does reaches the destination by its name: every address of it is judged, after
        // a look-up). Nothing is picked before that is known (round_robin's turn moves once).
        if (route_needs_addresses(cfg.routes, key)) return std::nullopt;
        const parent_route* route = route_for(cfg.routes, key, {});
        if (route && std::any_of(route->via.begin(), route->via.end(),
                                 [](std::size_t i) { return i != parent_route::direct; }))
            return std::nullopt;
    }
    const std::span<const ip_bytes> addresses = known ? std::span<const ip_bytes>(&*known, 1) : std::span<const ip_bytes>();
    way chosen = ctx.parents.choose(key, addresses, tried);
    if (chosen.parent)
        if (auto no = check_every_address(cfg, addresses, port)) return std::move(*no);
    return chosen;
}

task<std::variant<way, failure>> choose_way(exchange_context& ctx, const config& cfg, const std::string& key,
                                           const std::optional<ip_bytes>& address, std::uint16_t port,
                                           const parent_state* tried) {
    if (auto at_once = choose_way_at_once(ctx, cfg, key, address, port, tried)) co_return std::move(*at_once);
    // A name whose route needs its addresses, or whose route names a parent: looked up.
    auto found = co_await destination_addresses(cfg, ctx.resolver, key, port,
                                                cfg.policy_for(key, utc_today()).timeouts.connect);
    if (auto* no = std::get_if<failure>(&found)) co_return std::move(*no);
    const auto& addresses = std::get<0>(found);
    way chosen = ctx.parents.choose(key, addresses, tried);
    if (chosen.parent)  // a parent reaches the destination by its name: every address of it is judged
        if (auto no = check_every_address(cfg, addresses, port)) co_return std::move(*no);
    co_return chosen;
}

task<bool> next_way(exchange_context& ctx, const config& cfg, const std::string& key,
                    const std::optional<ip_bytes>& address, std::uint16_t port, errc why, way& via, parent_turn& turn) {
    auto next = co_await choose_way(ctx, cfg, key, address, port, via.parent.get());
    auto* other = std::get_if<way>(&next);
    if (!other || !other->all_down.empty()) co_return false;
    via.parent->count(outcome_of(why));
    turn.reset();
    via = std::move(*other);
    co_return true;
}

}  // namespace politeproxy
