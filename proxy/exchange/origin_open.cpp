#include "politeproxy/exchange/origin_open.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/exchange/parent_requests.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/tls/session.hpp"

#include <algorithm>

namespace politeproxy {

task<origin_opened> open_origin(exchange_context& ctx, const config& cfg, timed_socket& origin,
                                const origin_target& target, const pinned_address& pinned, bool offer_h2,
                                clock::duration phase, clock::time_point not_after, parent_state* parent) {
    const auto phase_ends = [&] { return std::min(clock::now() + phase, not_after); };
    if (parent) {  // for http the connection is the parent's (absolute-form); for https a tunnel through it
        const std::string authority =
            target.tls ? authority_of(pinned.address ? pinned.text : target.key, target.port) : std::string();
        if (auto failure = co_await connect_through(ctx, cfg, origin, *parent, authority, phase_ends())) {
            const bool parents_fault = failure->parents_own;
            co_return origin_opened{static_cast<connect_failure&&>(std::move(*failure)), false, parents_fault};
        }
        if (!target.tls) co_return origin_opened{};
    } else if (auto failure = co_await connect_origin(cfg, ctx.resolver, origin, target.key, target.port,
                                                      phase_ends() - clock::now(), pinned.address))
        co_return origin_opened{std::move(failure)};
    if (!target.tls) co_return origin_opened{std::nullopt, offer_h2};
    origin.expires_at(phase_ends());
    const auto hs = co_await tls::session::connect(origin, *ctx.origin_tls, target.key, offer_h2);
    origin.expires_never();
    if (hs.ec) {
        auto failure = tls::origin_handshake_failure(hs);
        co_return origin_opened{connect_failure{failure.why, std::move(failure.details)}};
    }
    co_return origin_opened{std::nullopt, hs.protocol == "h2"};
}

}  // namespace politeproxy
