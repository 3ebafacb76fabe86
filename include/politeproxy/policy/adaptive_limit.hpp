#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/policy/adjacent_levels.hpp"
#include "politeproxy/policy/host_policy.hpp"
#include "politeproxy/policy/latency_baseline.hpp"
#include "politeproxy/policy/latency_window.hpp"

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

/// Why the limit last changed: shown in /hosts.
enum class change_reason : std::uint8_t {
    none,            ///< never changed
    slow_response,   ///< responses slower than 1.5 x p95 (a jump)
    standing_queue,  ///< latency persistently above the no-load baseline
    throttled,       ///< 429 or 503
    refused,         ///< connection refused or reset
    healthy,         ///< grown: no queueing against the baseline (or, above configured, faster)
    recovered,       ///< adaptation off: stepped back after a pause
    reload,          ///< a config reload
    fleet,           ///< another process of the fleet changed it (shared through the store)
};
const char* name_of(change_reason r);

/// One host's adaptive concurrency limit, rate and pause.
///
/// Algorithm. The signal is time to response headers, held against two references: the
/// recent p95 (the last 64 responses, latency_window) and a no-load baseline
/// (latency_baseline). Every change of the limit starts an epoch; a response counts for
/// the epoch its request departed in, so what a level does is judged only by requests
/// sent at that level (responses already in flight when the limit fell do not shrink it
/// again: TCP cuts its window once per round trip). Nothing is decided before
/// `min_samples` responses.
///  - A jump: the median of the epoch's last 5 responses slower than 1.5 x p95: limit - 1.
///    (The median, not one response: a heavy-tailed host has a response beyond 1.5 x
///    p95 every hundred or so without being any slower.)
///  - A standing queue: after 16 responses of the epoch, and every 8 after, the mean of
///    its responses (the last ~64 weigh most: epoch_samples) is compared with the
///    baseline. Above it by more than max(floor, 4 standard errors of that mean), the
///    origin is queueing our requests. The floor is min(20%, 0.75 / (L - 1)): one
///    queued request at a limit of L adds 1 / (L - 1), under 20% from L = 6 on. For the
///    first 64 responses after a growth step 2 standard errors are enough: the step is
///    on trial. The limit goes to what Little's law says the origin serves without a
///    queue, limit x baseline / mean rounded down, but never below half (Gradient2's and
///    Envoy's 0.5 floor: one noisy window cannot take more than half) and at least one
///    less; below the level that serves, the next growth step's trial finds it again.
///    Why proportional and not Vegas' one step per round trip: a capacity drop from 8 to
///    2 needs six steps of a round trip at four times the latency each; proportional
///    gets there in one or two. Why no headroom (Gradient2 and Envoy add sqrt(limit)):
///    headroom is a standing queue by design, and the point is to have none.
///  - Adjacent levels: when the baseline test finds nothing, a growth step is also held
///    against the level it came from (adjacent_levels): one more request in flight that
///    waits at the origin raises the latency by (L + 1) / L, one that does not leaves
///    it as it was. The step goes back (limit - 1) when the ratio says "queues": beyond
///    2 standard errors, or on trial by the side of the midpoint after the responses
///    adjacent_levels asks for. An open trial does not hold growth back. This sees the
///    small queues a noisy service time hides from the baseline test (one request at C
///    = 4 under exponential service: adaptive_limit_sim_test, issue 31).
///  - Growth below the configured limit: one step per grow_interval, after 32 responses
///    of the epoch (16 at a limit of 1, where nothing of ours can queue) whose mean is
///    within 10% of the baseline. A step that is then shrunk was a probe that found the
///    origin's capacity: the next one waits twice as long (up to 4 grow_intervals) and
///    needs 64 responses; a step that held resets that.
///  - Growth above the configured limit: also one per grow_interval, only when the mean
///    of the responses at this limit is below 0.6 x the baseline: the host became
///    faster. Never above hard_max. A host whose latency is steady, however wide its
///    spread, never grows past configured (each response against 0.6 x p95 would let
///    a heavy tail grow it half of the time).
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
/// Sans-io: time and randomness come in as arguments; 200 bytes of state and the p95
/// ring, all of it plain values a fleet store could hold. Locking: none; the owner serialises calls
/// (host_gates holds the shard lock).
class adaptive_limit {
public:
    using random_source = std::function<double()>;  ///< uniform in [0, 1)

    static constexpr std::size_t window_size = latency_window::size;
    static constexpr std::size_t min_samples = 20;

    adaptive_limit(const host_policy& policy, clock::time_point now);

    /// A reload: a host at its configured values takes the new ones; a host that health
    /// has narrowed keeps the lower of its current and the new values, and its pause.
    void reconfigure(const host_policy& policy, clock::time_point now);

    limit_change on_signal(const health_signal& s, clock::time_point now, const random_source& random);

    /// The fleet's shared decision, read from the store (another process collapsed,
    /// paused, shrank or grew the host): takes its limit (within 1 and the larger of
    /// configured and hard_max) and its rate (at most configured), and extends the pause
    /// to `paused_until`. Nothing else moves: this process's own backoff and baseline
    /// stay its own. True when anything changed.
    bool adopt(std::size_t limit, double rate, clock::time_point paused_until, clock::time_point now);

    /// Lets the rate (and, without latency adaptation, the limit) recover; true when
    /// either changed.
    bool tick(clock::time_point now);

    std::size_t limit() const { return limit_; }
    double rate() const { return rate_; }
    clock::time_point paused_until() const { return paused_until_; }
    std::uint64_t epoch() const { return epoch_; }
    std::optional<clock::duration> p95() const { return recent_.p95(); }
    /// The no-load baseline, once enough responses have been seen.
    std::optional<clock::duration> baseline() const;
    /// Mean latency of the responses sent at the current limit (its epoch); nullopt
    /// before two have come back.
    std::optional<clock::duration> epoch_latency() const;
    change_reason last_reason() const { return last_reason_; }
    clock::time_point last_change() const { return last_change_; }

private:
    limit_change on_incident(const health_signal& s, clock::time_point now, const random_source& random);
    limit_change on_response(const health_signal& s, clock::time_point now);
    limit_change judge_epoch(clock::time_point now);
    limit_change grow(clock::time_point now);
    /// Sets the limit, starts a new epoch and remembers why.
    void set_limit(std::size_t limit, change_reason why, clock::time_point now);

    // Ordered (and the small fields narrowed) for size: a million idle hosts hold one each.
    const host_policy* policy_;
    double rate_;
    clock::time_point paused_until_{};
    clock::time_point last_step_;       ///< the limit's last change (no growth right after)
    clock::time_point last_rate_step_{};
    clock::time_point last_incident_{};
    clock::time_point last_change_{};
    std::uint64_t epoch_ = 0;           ///< bumped whenever the limit changes
    std::uint64_t collapse_epoch_ = 0;  ///< epoch_ right after the last collapse
    latency_window recent_;             ///< every response: p95
    epoch_samples current_epoch_;       ///< responses to requests sent in epoch_
    latency_baseline baseline_;
    std::uint32_t limit_;
    std::uint16_t consecutive_incidents_ = 0;
    std::uint8_t probe_backoff_ = 0;    ///< failed growth steps in a row (doubles the wait)
    change_reason last_reason_ = change_reason::none;
    adjacent_levels levels_;            ///< the current limit against the one below or above
};

}  // namespace politeproxy
