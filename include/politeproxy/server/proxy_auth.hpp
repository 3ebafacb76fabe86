#pragma once
// Proxy authentication at the edge, for every request source: a plain HTTP/1.1 request,
// a CONNECT (which covers what runs inside its tunnel or intercepted TLS) and an h2c
// stream. The check itself is proxy_users' (policy/); new credentials are hashed off the
// I/O threads (password_checks).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

struct config;
struct proxy_context;

/// A request's Proxy-Authorization: its value and how many such fields it had. Two or
/// more are refused whatever they say: an HTTP/1.1 reader takes the first, others the
/// last, so no field may decide alone.
struct proxy_credentials {
    bool required = false;   ///< security.users_file is set and no CONNECT authorized the request
    std::string_view value;  ///< empty when absent
    int fields = 0;

    void add(std::string_view v) {
        value = v;
        ++fields;
    }
};

/// Why a request's credentials are refused: errc::proxy_auth_required (missing, wrong or
/// ambiguous: 407) or errc::auth_checks_busy (too many new credentials waiting to be
/// hashed: 503, with `retry_after`).
using auth_refusal = refusal;

/// Nothing when `credentials` are not required or name a user with the right password
/// (then the request counts under its user when metrics.per_user is on).
/// `client` (the peer's address) takes its turn with other clients' for new credentials.
/// `user`, when given, gets the accepted user's name.
task<std::optional<auth_refusal>> refuse_credentials(proxy_context& ctx, const config& cfg,
                                                     proxy_credentials credentials, std::string client,
                                                     std::string* user = nullptr);

}  // namespace politeproxy
