#pragma once
// Overrides an operator puts through the admin API (SPEC.md "Admin API"): a per-host
// concurrency cap, rate or pause on top of what the registry (`hosts:`) gives the key,
// lasting until deleted or until it expires. Sans-io: bodies and files go in as text,
// values and error texts come out; the admin layer serves them and the exchange applies
// them. Plain values and free functions: no locking, safe to share once built.
#include "politeproxy/policy/host_policy.hpp"
#include "politeproxy/policy/wall_time.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace politeproxy {

/// One override an operator put through the admin API: it lasts until deleted or until `expires_at`.
struct live_override {
    std::string key;                          ///< the host key it applies to (exact, as host_key() spells it)
    std::optional<std::size_t> concurrency;   ///< a hard cap: the adaptive layer never grows past it
    std::optional<double> rate;               ///< requests per second
    std::optional<wall_clock::time_point> pause_until;  ///< nothing departs before it
    std::string reason;
    std::optional<wall_clock::time_point> expires_at;   ///< gone from this instant on (everywhere)
    std::string set_by;                       ///< the token's name
    wall_clock::time_point set_at{};

    /// Whether it is gone at `now` (from expires_at on, as a store's TTL ends it).
    bool expired(wall_clock::time_point now) const;
    bool operator==(const live_override&) const = default;
};

/// A refused PUT body (a 400): which field, why.
struct body_error {
    std::string field;    ///< the body's field, or "body" for the body as a whole
    std::string message;  ///< e.g. "must be a positive number"
};

/// Bounds of what an override may say.
namespace override_limits {
inline constexpr std::size_t max_concurrency = 100000;
inline constexpr double max_rate = 1e6;
inline constexpr double min_rate = 0.001;  ///< one request in 1000 s; slower is a pause
inline constexpr std::size_t max_reason_bytes = 500;
inline constexpr auto max_pause = std::chrono::hours{24 * 30};
inline constexpr auto max_expires_in = std::chrono::hours{24 * 365};
}  // namespace override_limits

/// A PUT body: a JSON object of {concurrency, rate, pause_for | pause_until, reason,
/// expires_in}; a field given as null counts as absent. Durations are strings as in the
/// config ("10m") or numbers of seconds; pause_until is an RFC 3339 timestamp or a number
/// of Unix seconds. Without expires_in it lasts until deleted, except a pause alone,
/// which expires when the pause ends. Like the registry, raising concurrency or rate above
/// `registry` (what the key has without an override) needs a non-blank reason.
std::variant<live_override, body_error> parse_override_body(std::string_view body, std::string_view key,
                                                            const host_policy& registry, std::string_view set_by,
                                                            wall_clock::time_point now);

/// The policy with the override on top. `concurrency` replaces both concurrency and
/// adaptive.hard_max, so the adaptive layer never grows past the operator's cap. `rate`
/// replaces rate, and the burst becomes min(registry burst, max(1, rate)): a lowered rate
/// never lets more than about one second's worth depart at once, and an override never
/// raises the burst (the registry, with its reason, does that). The pause is not a policy
/// value: whoever applies the override holds departures until `pause_until`.
host_policy with_override(const host_policy& registry, const live_override& o);

/// One JSON object, the API's and the store's form: every field, timestamps as RFC 3339
/// UTC with milliseconds, absent optionals as null.
std::string to_json(const live_override& o);
/// to_json's form read back; nothing when it is not a valid override.
std::optional<live_override> override_from_json(std::string_view text);

/// The state file (admin.state_file): {"version": 1, "overrides": [ ... ]}.
std::string state_file_text(const std::vector<live_override>& all);
/// The overrides a state file holds (a later entry for the same key replaces an earlier
/// one, in its place), or what is wrong and where: "not JSON at byte 120: incomplete
/// JSON", "overrides[3]: rate must be a positive number". Expired entries are kept: the
/// caller drops them against its own `now`.
std::variant<std::vector<live_override>, std::string> parse_state_file(std::string_view text);

/// For a log line: "concurrency 1, rate 0.5/s, paused until 2026-12-05T12:00:00.000Z,
/// expires ..." or "none".
std::string summary_of(const live_override* o);

}  // namespace politeproxy
