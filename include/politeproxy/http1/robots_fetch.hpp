#pragma once
#include "politeproxy/base/executor.hpp"
#include "politeproxy/policy/permit.hpp"

#include <string>

namespace politeproxy {

struct config;
struct origin_target;
struct pinned_address;
struct proxy_context;

/// The key robots.txt is kept under: "http://host:port" or "https://host:port".
std::string robots_origin(const origin_target& target);

/// robots.crawl_delay: honor, for a request whose origin's robots.txt is due (host_gates::
/// robots_due said so, and gave `slot` when the gate was free): reads `origin`'s /robots.txt through the host's own gate (slot and
/// token, health and metrics as any request; the host's other requests wait for it when
/// it takes the gate at once), over TLS for an https origin, as an HTTP/1.1 GET with the
/// client's User-Agent (its first 512 bytes), within the host's timeouts and 10 s in all.
/// A 2xx body gives the Crawl-delay for that User-Agent (or `*`); a 4xx but 429 means none
/// is asked; anything else (3xx, 429, 5xx, a failure, a body over robots_txt_max_bytes)
/// counts as failed: the rate stays as configured.
/// Whatever happens, host_gates::robots_done hears the end.
task<void> fetch_robots(proxy_context& ctx, const config& cfg, const origin_target& target, std::string origin,
                        std::string gate_key, const pinned_address& pinned, std::string user_agent, permit slot);

}  // namespace politeproxy
