#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/config/config.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

namespace politeproxy {

/// What one request told about its host's health.
struct health_signal {
    enum class kind : std::uint8_t {
        response,   ///< response headers arrived (any status but 429/503)
        throttled,  ///< 429 or 503
        refused,    ///< connection refused or reset by the origin
    };
    kind what = kind::response;
    clock::duration latency{};                   ///< time to response headers
    std::optional<clock::duration> retry_after;  ///< parsed and capped
    std::uint64_t epoch = 0;                     ///< controller epoch when the request departed

    static health_signal answered(clock::duration latency) { return {kind::response, latency, std::nullopt, 0}; }
    static health_signal throttled_by(clock::duration latency, std::optional<clock::duration> retry_after) {
        return {kind::throttled, latency, retry_after, 0};
    }
    static health_signal refused_connection() { return {kind::refused, {}, std::nullopt, 0}; }
};

enum class limit_change : std::uint8_t { none, up, down, collapse };

/// One host's adaptive concurrency limit, rate and pause.
///
/// Algorithm. Latency: time to response headers, kept as an exact p95 over a sliding
/// window of the last `window_size` successful responses. A window, not a decaying
/// average, so that one slow episode ages out after a known number of responses, and
/// small enough (256 bytes) to keep per host; p95 is recomputed with nth_element
/// on a copy of 64 values, and only when a new sample and the one it replaces lie on
/// different sides of it (otherwise p95 cannot have moved). No decision
/// is taken before `min_samples` responses.
///  - Slower than 1.5 x p95: limit - 1, at most once per congestion event: a response
///    to a request that departed before the limit last fell (an older epoch) does not
///    shrink it again, as TCP cuts its window once per round trip.
///  - Faster than 0.6 x p95 (or, below the configured limit, no slower than p95): limit
///    + 1, at most once per grow_interval, never above max(hard_max, configured).
///  - 429, 503, refused or reset: the limit collapses to 1, the rate halves, and the host
///    pauses for max(Retry-After, backoff). Backoff starts at backoff.initial and doubles
///    per consecutive incident up to backoff.max, with +-jitter; a quiet forgive_after
///    resets it. Incidents from requests already in flight at the last collapse extend
///    the pause to their Retry-After but count as the same incident.
///  - The rate recovers by doubling once per grow_interval after the pause, up to the
///    configured rate.
/// With adaptive.enabled false only incidents act (collapse, pause, rate), never latency;
/// the limit then recovers by one per grow_interval after the pause, up to configured.
///
/// Sans-io: time and randomness come in as arguments. Locking: none; the owner
/// serialises calls (host_gates holds the shard lock).
class adaptive_limit {
public:
    using random_source = std::function<double()>;  ///< uniform in [0, 1)

    static constexpr std::size_t window_size = 64;
    static constexpr std::size_t min_samples = 20;

    adaptive_limit(const host_policy& policy, clock::time_point now);

    /// A reload: a host at its configured values takes the new ones; a host that health
    /// has narrowed keeps the lower of its current and the new values, and its pause.
    void reconfigure(const host_policy& policy, clock::time_point now);

    limit_change on_signal(const health_signal& s, clock::time_point now, const random_source& random);

    /// Lets the rate (and, without latency adaptation, the limit) recover; true when
    /// either changed.
    bool tick(clock::time_point now);

    std::size_t limit() const { return limit_; }
    double rate() const { return rate_; }
    clock::time_point paused_until() const { return paused_until_; }
    std::uint64_t epoch() const { return epoch_; }
    std::optional<clock::duration> p95() const;

private:
    limit_change on_incident(const health_signal& s, clock::time_point now, const random_source& random);
    limit_change on_response(const health_signal& s, clock::time_point now);
    void add_sample(clock::duration latency);

    const host_policy* policy_;
    std::size_t limit_;
    double rate_;
    clock::time_point paused_until_{};
    clock::time_point last_step_;       ///< last grow, or last decrease (no growth right after)
    clock::time_point last_rate_step_{};
    clock::time_point last_incident_{};
    unsigned consecutive_incidents_ = 0;
    std::uint64_t epoch_ = 0;           ///< bumped whenever the limit falls
    std::uint64_t collapse_epoch_ = 0;  ///< epoch_ right after the last collapse
    std::array<std::uint32_t, window_size> window_{};  ///< microseconds, a ring
    std::uint32_t samples_ = 0;                         ///< total seen (ring index = samples_ % size)
    mutable std::uint32_t p95_us_ = 0;                  ///< p95 of the window; 0: not computed yet
};

}  // namespace politeproxy
