#pragma once
// Proxy authentication at the edge, for every request source: a plain HTTP/1.1 request,
// a CONNECT (which covers what runs inside its tunnel or intercepted TLS) and an h2c
// stream. The check itself is proxy_users' (policy/).
#include <string_view>

namespace politeproxy {

struct config;
struct proxy_context;

/// True when no security.users_file is set, or `proxy_authorization` (the request's
/// Proxy-Authorization value, empty when absent) names a user with the right password;
/// counts the request under its user when metrics.per_user is on.
bool proxy_authorized(proxy_context& ctx, const config& cfg, std::string_view proxy_authorization);

/// The details of the 407 answer for `proxy_authorization`.
std::string_view proxy_auth_details(std::string_view proxy_authorization);

}  // namespace politeproxy
