#pragma once
// Proxy authentication at the edge, for every request source: a plain HTTP/1.1 request,
// a CONNECT (which covers what runs inside its tunnel or intercepted TLS) and an h2c
// stream. The check itself is proxy_users' (policy/).
#include <string_view>

namespace politeproxy {

struct config;
struct proxy_context;

/// A request's Proxy-Authorization: its value and how many such fields it had. Two or
/// more are refused whatever they say: an HTTP/1.1 reader takes the first, others the
/// last, so no field may decide alone.
struct proxy_credentials {
    std::string_view value;  ///< empty when absent
    int fields = 0;

    void add(std::string_view v) {
        value = v;
        ++fields;
    }
};

/// True when no security.users_file is set, or `credentials` are one Proxy-Authorization
/// field naming a user with the right password; counts the request under its user when
/// metrics.per_user is on.
bool proxy_authorized(proxy_context& ctx, const config& cfg, const proxy_credentials& credentials);

/// The details of the 407 answer for `credentials`.
std::string_view proxy_auth_details(const proxy_credentials& credentials);

}  // namespace politeproxy
