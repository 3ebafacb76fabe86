#include "politeproxy/policy/adaptive_limit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace politeproxy {
namespace {

constexpr double shrink_above = 1.5;         // x p95: a jump
constexpr double grow_below = 0.6;           // x baseline: above configured, faster than this
constexpr double queue_floor = 0.20;         // above the baseline by at least this share
constexpr double queue_errors = 4.0;         // ... and by this many standard errors
constexpr double probe_errors = 2.0;         // ... or this many, just after a growth step
constexpr double no_queue_within = 0.10;     // growth: the epoch's mean this close to it
constexpr std::uint32_t judge_after = 16;    // responses of an epoch before it is judged
constexpr std::uint32_t judge_every = 8;     // ... and then every this many
constexpr std::uint32_t grow_after = 32;     // responses of an epoch before it may grow (x2 after a failed probe)
constexpr unsigned max_probe_backoff = 2;    // failed growth steps wait up to 2^2 intervals
constexpr double level_errors = 2.0;        // adjacent levels: standard errors for a verdict
constexpr std::uint32_t level_decide_by = 96;  // ... or the side of the midpoint after this many
constexpr double min_rate_share = 1.0 / 64;  // halving never goes below configured / 64

std::size_t ceiling(const host_policy& p) { return std::max(p.adaptive.hard_max, p.concurrency); }

std::uint32_t narrow_limit(std::size_t limit) {
    return static_cast<std::uint32_t>(std::min<std::size_t>(limit, std::numeric_limits<std::uint32_t>::max()));
}

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

clock::duration from_seconds(double s) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

static_assert(sizeof(adaptive_limit) <= 200, "a million idle hosts hold one each (host_scale_bench.py)");

const char* name_of(change_reason r) {
    switch (r) {
        case change_reason::none: return "none";
        case change_reason::slow_response: return "slow_response";
        case change_reason::standing_queue: return "standing_queue";
        case change_reason::throttled: return "throttled";
        case change_reason::refused: return "refused";
        case change_reason::healthy: return "healthy";
        case change_reason::recovered: return "recovered";
        case change_reason::reload: return "reload";
        case change_reason::fleet: return "fleet";
    }
    return "none";
}

adaptive_limit::adaptive_limit(const host_policy& policy, clock::time_point now)
    : policy_(&policy), rate_(policy.rate), last_step_(now), limit_(narrow_limit(policy.concurrency)) {}

void adaptive_limit::reconfigure(const host_policy& policy, clock::time_point now) {
    // A host that health has narrowed stays narrowed (a reload must not undo a 429);
    // one running at its configured values moves to the new ones.
    const bool narrowed = limit_ < policy_->concurrency || rate_ < policy_->rate || now < paused_until_;
    const std::size_t limit = narrowed ? std::min<std::size_t>(limit_, policy.concurrency) : policy.concurrency;
    rate_ = narrowed ? std::min(rate_, policy.rate) : policy.rate;
    policy_ = &policy;
    if (limit != limit_) set_limit(limit, change_reason::reload, now);
}

std::optional<clock::duration> adaptive_limit::baseline() const {
    const auto b = baseline_.seconds();
    if (!b) return std::nullopt;
    return from_seconds(*b);
}

std::optional<clock::duration> adaptive_limit::epoch_latency() const {
    if (current_epoch_.count() < 2) return std::nullopt;
    return from_seconds(current_epoch_.mean().seconds);
}

void adaptive_limit::set_limit(std::size_t limit, change_reason why, clock::time_point now) {
    const bool shrink = limit < limit_;
    // A growth step followed by a shrink was a probe that found the origin's capacity:
    // the next one waits longer. One followed by another growth held: back to the pace.
    if (last_reason_ == change_reason::healthy) {
        if (why == change_reason::healthy) probe_backoff_ = 0;
        else if (shrink) probe_backoff_ = static_cast<std::uint8_t>(std::min(probe_backoff_ + 1u, max_probe_backoff));
    }
    levels_.moved(limit_, limit);
    limit_ = narrow_limit(limit);
    ++epoch_;
    current_epoch_.clear();
    last_step_ = now;
    last_change_ = now;
    last_reason_ = why;
}

bool adaptive_limit::adopt(std::size_t limit, double rate, clock::time_point paused_until, clock::time_point now) {
    bool changed = false;
    limit = std::clamp<std::size_t>(limit, 1, std::max(policy_->concurrency, policy_->adaptive.hard_max));
    if (limit != limit_) {
        set_limit(limit, change_reason::fleet, now);
        changed = true;
    }
    rate = std::min(rate, policy_->rate);
    if (rate > 0 && std::abs(rate - rate_) > 1e-6 * std::max(1.0, rate_)) {  // the store keeps micro-tokens
        rate_ = rate;
        last_rate_step_ = now;
        changed = true;
    }
    if (paused_until > paused_until_) {
        paused_until_ = paused_until;
        changed = true;
    }
    return changed;
}

limit_change adaptive_limit::on_signal(const health_signal& s, clock::time_point now, const random_source& random) {
    if (s.what == health_signal::kind::response) return on_response(s, now);
    return on_incident(s, now, random);
}

limit_change adaptive_limit::on_incident(const health_signal& s, clock::time_point now, const random_source& random) {
    const auto& backoff = policy_->backoff;
    const clock::duration asked = s.retry_after.value_or(clock::duration::zero());
    if (consecutive_incidents_ > 0 && s.epoch < collapse_epoch_) {
        // Already in flight when the host last collapsed: the same incident.
        paused_until_ = std::max(paused_until_, now + asked);
        return limit_change::none;
    }
    if (consecutive_incidents_ > 0 && now - last_incident_ >= backoff.forgive_after) consecutive_incidents_ = 0;
    if (consecutive_incidents_ < std::numeric_limits<std::uint16_t>::max()) ++consecutive_incidents_;
    last_incident_ = now;

    const double doublings = std::min<double>(consecutive_incidents_ - 1, 62);
    const double base = std::min(seconds(backoff.initial) * std::exp2(doublings), seconds(backoff.max));
    const double jittered = base * (1.0 + backoff.jitter * (2.0 * random() - 1.0));
    paused_until_ = std::max(paused_until_, now + std::max(from_seconds(jittered), asked));

    rate_ = std::max(rate_ / 2, policy_->rate * min_rate_share);
    set_limit(1, s.what == health_signal::kind::throttled ? change_reason::throttled : change_reason::refused, now);
    last_step_ = paused_until_;
    last_rate_step_ = paused_until_;
    collapse_epoch_ = epoch_;
    return limit_change::collapse;
}

limit_change adaptive_limit::on_response(const health_signal& s, clock::time_point now) {
    // Only a response to a request sent at the current limit tells what that limit does.
    const bool judged = policy_->adaptive.enabled && s.epoch == epoch_;
    const bool enough = recent_.count() >= min_samples;
    // The jump test holds the epoch's median against the p95 before this response (and the
    // responses of the jump itself) joined the window: read before it joins, and only where
    // the test runs (a selection over the window; with adaptation off, never).
    const bool jump_test =
        judged && enough && limit_ > 1 && current_epoch_.count() >= epoch_samples::median_of - 1;
    const auto p95 = jump_test ? recent_.p95() : std::nullopt;
    recent_.add(s.latency);
    baseline_.add(s.latency);
    if (!judged) return limit_change::none;
    current_epoch_.add(s.latency);
    levels_.add(limit_, s.latency);
    if (!enough) return limit_change::none;

    const std::uint32_t n = current_epoch_.count();
    if (jump_test && seconds(current_epoch_.median()) > shrink_above * seconds(*p95)) {
        set_limit(limit_ - 1, change_reason::slow_response, now);
        return limit_change::down;
    }
    if (n < judge_after || n % judge_every != 0) return limit_change::none;
    return judge_epoch(now);
}

limit_change adaptive_limit::judge_epoch(clock::time_point now) {
    const auto base = baseline_.seconds();
    const latency_mean mean = current_epoch_.mean();
    if (base && limit_ > 1) {
        // A growth step is on trial for its first responses and must show it made no
        // queue; a level the host has held must be shown wrong beyond doubt.
        const bool on_trial = last_reason_ == change_reason::healthy && current_epoch_.count() <= 2 * grow_after;
        const double errors = on_trial ? probe_errors : queue_errors;
        // One request waiting at a limit of L adds 1 / (L - 1) to the latency: the floor
        // is three quarters of that, up to 20%.
        const double floor = std::min(queue_floor, 0.75 / static_cast<double>(limit_ - 1));
        const double queued_above = *base * (1 + std::max(floor, errors * mean.relative_error));
        if (mean.seconds > queued_above) {
            // Little's law: limit / mean is what the origin serves; at the baseline's
            // latency that is limit x base / mean requests in flight, with none queued.
            // (The relative epsilon: the mean is held in float.)
            const auto served = static_cast<std::size_t>(std::floor(limit_ * *base / mean.seconds * (1 + 1e-6)));
            const std::size_t target = std::max<std::size_t>({served, (limit_ + 1u) / 2, 1});
            set_limit(std::min<std::size_t>(target, limit_ - 1u), change_reason::standing_queue, now);
            return limit_change::down;
        }
    }
    // A growth step against the level it came from. An open trial does not hold growth
    // back (grow() still wants the baseline's "no queue"): waiting for every verdict
    // makes the way back up after a capacity drop several times slower under a noisy
    // service time (adaptive_limit_sim_test, "when capacity returns").
    if (limit_ == levels_.lower() + 1 && levels_.judge(level_errors, level_decide_by) == adjacent_levels::verdict::queues) {
        set_limit(limit_ - 1, change_reason::standing_queue, now);
        return limit_change::down;
    }
    return grow(now);
}

limit_change adaptive_limit::grow(clock::time_point now) {
    // After failed probes the next one waits longer (2^n intervals) and must hold for
    // twice the responses to be trusted; after a step that held, the pace is back.
    const unsigned backoff = last_reason_ == change_reason::healthy ? 0 : probe_backoff_;
    if (now < paused_until_ || now - last_step_ < policy_->adaptive.grow_interval * (1 << backoff) ||
        limit_ >= ceiling(*policy_))
        return limit_change::none;
    // At 1 none of our requests can queue behind another: the host just has to look healthy.
    const std::uint32_t needed = limit_ == 1 ? judge_after : grow_after << std::min(backoff, 1u);
    if (current_epoch_.count() < needed) return limit_change::none;
    const latency_mean mean = current_epoch_.mean();
    // Without a baseline yet (a host's first ~100 responses), "no slower than p95".
    const double no_queue = baseline_.seconds() ? *baseline_.seconds() * (1 + no_queue_within) : seconds(*recent_.p95());
    if (mean.seconds > no_queue) return limit_change::none;
    // Above the configured limit only a host that became faster: the mean of the
    // responses at this limit under 0.6 x the no-load baseline. The baseline follows a
    // faster host within a few blocks (the p95 window re-centres sooner), so this holds
    // for some blocks; a heavy-tailed but steady host never passes it, where each
    // response against 0.6 x p95 would half of the time.
    if (limit_ >= policy_->concurrency &&
        (!baseline_.seconds() || mean.seconds >= grow_below * *baseline_.seconds()))
        return limit_change::none;
    set_limit(limit_ + 1, change_reason::healthy, now);
    return limit_change::up;
}

bool adaptive_limit::tick(clock::time_point now) {
    if (now < paused_until_ || now - last_rate_step_ < policy_->adaptive.grow_interval) return false;
    // Without latency adaptation nothing else would ever undo a collapse: the limit
    // steps back toward its configured value with the rate.
    const bool limit_back = !policy_->adaptive.enabled && limit_ < policy_->concurrency;
    if (rate_ >= policy_->rate && !limit_back) return false;
    rate_ = std::min(policy_->rate, rate_ * 2);
    if (limit_back) set_limit(limit_ + 1, change_reason::recovered, now);
    last_rate_step_ = now;
    return true;
}

}  // namespace politeproxy
