#pragma once
#include "politeproxy/base/clock.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace politeproxy {

class dns_resolver;
class host_gates;
class parent_set;
struct host_snapshot;

/// `s` as a JSON string (quoted, escaped).
void append_json_string(std::string& out, std::string_view s);

/// One host's object of the documents below; with `names`, the addresses its key
/// resolves to from the DNS cache.
void append_host_json(std::string& out, const host_snapshot& h, const parent_set& parents,
                      std::chrono::system_clock::time_point wall_now, const dns_resolver* names = nullptr);

/// The admin listener's /hosts document: a JSON array, one object per tracked host,
/// busiest first: key, limit, configured_limit, in_flight, waiting, rate,
/// configured_rate, rate_source (config, adaptive or robots), paused_until (RFC 3339 UTC, or null), paused_seconds,
/// override_reason (or null), override_source ("api", "registry" or null), override (the
/// API's: policy/live_override's JSON, or null), p95_seconds (or null), domain_group (groups.domain: the
/// group's key, in_flight, waiting and limit across its hosts; or null), enforce, via
/// (the parents of its route by name, "direct" among them; empty: direct), clients (with
/// clients.share: fair, the queue's lanes, most waiting first: client (null: the proxy's
/// own requests), waiting, weight, at_cap (set aside at clients.max_in_flight)),
/// addresses (with `names`: the DNS cache's addresses for the key, in connect order; null
/// when none is cached) and addresses_ttl_seconds (how long they hold; negative: expired,
/// served stale or due for a refresh).
std::string render_hosts_json(const host_gates& gates, const parent_set& parents, clock::time_point now,
                              std::chrono::system_clock::time_point wall_now, const dns_resolver* names = nullptr);

/// GET /api/clients (clients:): {"clients": [...], "more": N}, the busiest
/// max_clients_listed first: client, weight, waiting (for a slot, all hosts), in_flight
/// (holding one), requests (by outcome); `more`: how many were left out.
inline constexpr std::size_t max_clients_listed = 1000;
std::string render_clients_json(const host_gates& gates);

}  // namespace politeproxy
