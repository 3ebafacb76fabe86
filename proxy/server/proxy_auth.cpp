#include "politeproxy/server/proxy_auth.hpp"

#include "politeproxy/admin/metrics.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/policy/proxy_users.hpp"
#include "politeproxy/server/proxy_context.hpp"

namespace politeproxy {

bool proxy_authorized(proxy_context& ctx, const config& cfg, std::string_view proxy_authorization) {
    if (!cfg.security.users) return true;
    const auto user = cfg.security.users->check(proxy_authorization);
    if (!user) return false;
    if (cfg.per_user_metrics) ctx.metrics.user_request(*user);
    return true;
}

std::string_view proxy_auth_details(std::string_view proxy_authorization) {
    return proxy_authorization.empty() ? "Proxy-Authorization is required (security.users_file)"
                                       : "the Proxy-Authorization credentials are not accepted";
}

}  // namespace politeproxy
