#include "politeproxy/exchange/robots_check.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/robots_fetch.hpp"
#include "politeproxy/net/origin_connect.hpp"

#include <boost/asio/this_coro.hpp>

namespace politeproxy {
namespace asio = boost::asio;

namespace {

// How long a request waits for another request's read of robots.txt: the fetch's own
// bound and some (the fetch reports as it ends).
constexpr auto read_wait = std::chrono::seconds(11);

}  // namespace

task<std::optional<refusal>> check_robots(exchange_context& ctx, const config& cfg, const origin_target& target,
                                          const pinned_address& pinned, const std::shared_ptr<parent_state>& parent,
                                          const std::string& key, std::string_view request_user_agent) {
    const std::string origin = robots_origin(target);
    const std::string_view agent = cfg.robots.user_agent.empty() ? request_user_agent : cfg.robots.user_agent;
    const std::string_view path = target.path.empty() ? std::string_view("/") : std::string_view(target.path);
    const auto give_up = clock::now() + read_wait;
    std::optional<steady_timer> pause;
    // Another request's read ends at a moment nobody tells this one of (it may run on
    // another worker): looked at again after 10 ms, doubling up to 200 ms. Only requests
    // that arrive while an origin's robots.txt is read (once per cache_ttl) wait so.
    for (auto step = std::chrono::milliseconds(10);; step = std::min(step * 2, std::chrono::milliseconds(200))) {
        if (auto turn = ctx.gates.robots_due(origin, key, pinned.text))
            co_await fetch_robots(ctx, cfg, target, pinned, parent, std::string(agent), turn);
        const robots_verdict said = ctx.gates.robots_verdict_for(origin);
        switch (said.what) {
        case robots_verdict::kind::read:
            if (!cfg.robots.enforce || said.rules->allowed(path, agent)) co_return std::nullopt;
            co_return refusal{{errc::robots_disallowed, "robots.txt"}, std::nullopt};
        case robots_verdict::kind::unreachable:
            co_return refusal{{errc::robots_unreachable, "robots.txt unreachable: a complete disallow until it is read"},
                              said.retry_after};
        case robots_verdict::kind::unknown: break;
        }
        if (clock::now() >= give_up)
            co_return refusal{{errc::robots_unreachable, "robots.txt is still being read"}, std::chrono::seconds(1)};
        if (!pause) pause.emplace(co_await asio::this_coro::executor);
        pause->expires_after(step);
        co_await pause->async_wait(use_tuple);
    }
}

}  // namespace politeproxy
