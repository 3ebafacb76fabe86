#include "politeproxy/exchange/route_choice.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/net/origin_connect.hpp"

namespace politeproxy {

task<std::variant<way, failure>> choose_way(exchange_context& ctx, const config& cfg, const std::string& key,
                                           const std::optional<ip_bytes>& address, std::uint16_t port,
                                           const parent_state* tried) {
    if (cfg.routes.empty()) co_return way{};
    std::vector<ip_bytes> addresses;
    if (address) addresses.push_back(*address);
    else if (const resolve_entry* entry = cfg.static_entry(key)) addresses.push_back(entry->bytes);
    bool looked_up = !addresses.empty();
    const auto look_up = [&]() -> task<std::optional<failure>> {
        auto found = co_await destination_addresses(cfg, ctx.resolver, key, port,
                                                    cfg.policy_for(key, utc_today()).timeouts.connect);
        if (auto* no = std::get_if<failure>(&found)) co_return std::move(*no);
        addresses = std::move(std::get<0>(found));
        looked_up = true;
        co_return std::nullopt;
    };
    if (!looked_up && route_needs_addresses(cfg.routes, key))
        if (auto no = co_await look_up()) co_return std::move(*no);
    way chosen = ctx.parents.choose(key, addresses, tried);
    if (chosen.parent) {  // a parent reaches the destination by its name: every address of it is judged
        if (!looked_up)
            if (auto no = co_await look_up()) co_return std::move(*no);
        if (auto no = check_every_address(cfg, addresses, port)) co_return std::move(*no);
    }
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
