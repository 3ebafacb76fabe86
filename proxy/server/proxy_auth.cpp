#include "politeproxy/server/proxy_auth.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/policy/proxy_users.hpp"
#include "politeproxy/server/password_checks.hpp"
#include "politeproxy/server/proxy_context.hpp"

namespace politeproxy {

task<std::optional<auth_refusal>> refuse_credentials(proxy_context& ctx, const config& cfg,
                                                     proxy_credentials credentials, std::string client,
                                                     std::string* user) {
    if (!credentials.required || !cfg.security.users) co_return std::nullopt;
    if (credentials.fields == 0)
        co_return auth_refusal{errc::proxy_auth_required, "Proxy-Authorization is required (security.users_file)", {}};
    if (credentials.fields > 1)
        co_return auth_refusal{errc::proxy_auth_required, "more than one Proxy-Authorization field", {}};
    auto verdict = cfg.security.users->recall(credentials.value);
    if (!verdict) {  // new credentials: hashed off this thread
        auto checked = co_await ctx.passwords.check(cfg.security.users, std::string(credentials.value), std::move(client));
        if (checked.busy)
            co_return auth_refusal{errc::auth_checks_busy, "too many new credentials are waiting to be checked",
                                   std::chrono::seconds(1)};
        verdict.emplace(proxy_users::verdict{std::move(checked.user)});
    }
    if (!verdict->user) co_return auth_refusal{errc::proxy_auth_required, "the Proxy-Authorization credentials are not accepted", {}};
    if (cfg.per_user_metrics) ctx.metrics.user_request(*verdict->user);
    if (user) *user = *verdict->user;
    co_return std::nullopt;
}

}  // namespace politeproxy
