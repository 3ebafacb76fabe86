#pragma once
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/http1/origin_target.hpp"

#include <memory>
#include <memory_resource>
#include <optional>
#include <string_view>
#include <string>

namespace politeproxy {

struct config;
class parent_state;
struct pinned_address;
struct exchange_context;

/// The key robots.txt is kept under: "http://host:port" or "https://host:port".
std::string robots_origin(const origin_target& target);

/// Where a redirect from `from` to `location` goes: an absolute http:// or https:// URL
/// (its host judged when connecting, as any origin's), or a path on the same origin;
/// nullopt for anything else. The target's path lives in `arena`.
std::optional<origin_target> redirect_target(const origin_target& from, std::string_view location,
                                             std::pmr::memory_resource& arena);

/// The fetch of a `turn` host_gates::robots_due gave (robots.crawl_delay: honor or
/// robots.disallow: enforce): reads the origin's /robots.txt through the host's own gate
/// (the turn's slot when it took the gate at once, holding the host's other requests,
/// else parked like any request; health and metrics as any request), over TLS for an
/// https origin, as an HTTP/1.1 GET with the client's User-Agent (its first 512 bytes),
/// within the host's timeouts and 10 s in all. RFC 9309 2.3.1: a 2xx body is parsed (its
/// first robots_txt_max_bytes); 3xx redirects are followed, up to 5 (more, or one without
/// a usable Location, count as a 4xx); a 4xx but 429 means no restrictions; 429, 5xx, an
/// answer the host's throttle signals call "slow down" (a challenge page) or no answer
/// leave the read `unreachable`; refused before it asked (admission, a busy parent), `not_read`. The fetch writes what it learnt into `turn`,
/// whose owner (the request) ends it, also when the fetch never ran. Through `parent`
/// when the request's route names one (null: direct), as the request goes; the hops of
/// a redirect too (only the first hop is reported to the host's health).
task<void> fetch_robots(exchange_context& ctx, const config& cfg, const origin_target& target, const pinned_address& pinned,
                        const std::shared_ptr<parent_state>& parent,
                        std::string user_agent, robots_turn& turn);

}  // namespace politeproxy
