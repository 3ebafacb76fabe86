#pragma once
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <memory>
#include <string>

namespace politeproxy {

struct config;
class parent_state;
struct origin_target;
struct pinned_address;
struct exchange_context;

/// The key robots.txt is kept under: "http://host:port" or "https://host:port".
std::string robots_origin(const origin_target& target);

/// robots.crawl_delay: honor, the fetch of a `turn` host_gates::robots_due gave: reads
/// the origin's /robots.txt through the host's own gate (the turn's slot when it took the
/// gate at once, holding the host's other requests, else parked like any request; health
/// and metrics as any request), over TLS for an https origin, as an HTTP/1.1 GET with the
/// client's User-Agent (its first 512 bytes), within the host's timeouts and 10 s in all.
/// A 2xx body gives the Crawl-delay for that User-Agent (or `*`); a 4xx but 429 means none
/// is asked; anything else (3xx, 429, 5xx, a failure, a body over robots_txt_max_bytes)
/// counts as failed: the rate stays as configured. The fetch writes what it learnt into
/// `turn`, whose owner (the request) ends it, also when the fetch never ran. Through
/// `parent` when the request's route names one (null: direct), as the request goes.
task<void> fetch_robots(exchange_context& ctx, const config& cfg, const origin_target& target, const pinned_address& pinned,
                        const std::shared_ptr<parent_state>& parent,
                        std::string user_agent, robots_turn& turn);

}  // namespace politeproxy
