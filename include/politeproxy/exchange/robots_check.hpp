#pragma once
// robots.txt before a request's slot (robots.crawl_delay: honor, robots.disallow: enforce):
// the origin's robots.txt read when due, then its word on this request.
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

struct config;
struct exchange_context;
struct origin_target;
struct pinned_address;
class parent_state;

/// Reads `target`'s robots.txt when it is due (exchange/robots_fetch: this request's
/// turn), or waits for the read another request is making (at most the fetch's 10 s),
/// then asks what it says of the request's path for its agent (robots.user_agent, else
/// `request_user_agent`): nullopt, the request goes on; robots_disallowed (403, with
/// robots.disallow: enforce); robots_unreachable (503 with Retry-After until the next
/// fetch: RFC 9309's complete disallow while robots.txt cannot be read). `key`: the gate
/// the request goes through, `parent`: its route's parent, if any.
task<std::optional<refusal>> check_robots(exchange_context& ctx, const config& cfg, const origin_target& target,
                                          const pinned_address& pinned, const std::shared_ptr<parent_state>& parent,
                                          const std::string& key, std::string_view request_user_agent);

}  // namespace politeproxy
