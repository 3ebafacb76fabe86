#include "politeproxy/server/proxy_auth.hpp"

#include "politeproxy/admin/metrics.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/policy/proxy_users.hpp"
#include "politeproxy/server/proxy_context.hpp"

namespace politeproxy {

bool proxy_authorized(proxy_context& ctx, const config& cfg, const proxy_credentials& credentials) {
    if (!cfg.security.users) return true;
    if (credentials.fields != 1) return false;
    const auto user = cfg.security.users->check(credentials.value);
    if (!user) return false;
    if (cfg.per_user_metrics) ctx.metrics.user_request(*user);
    return true;
}

std::string_view proxy_auth_details(const proxy_credentials& credentials) {
    if (credentials.fields == 0) return "Proxy-Authorization is required (security.users_file)";
    if (credentials.fields > 1) return "more than one Proxy-Authorization field";
    return "the Proxy-Authorization credentials are not accepted";
}

}  // namespace politeproxy
