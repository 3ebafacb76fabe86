#include "politeproxy/policy/adaptive_limit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace politeproxy {
namespace {

constexpr double shrink_above = 1.5;   // x p95
constexpr double grow_below = 0.6;     // x p95
constexpr double min_rate_share = 1.0 / 64;  // halving never goes below configured / 64

std::size_t ceiling(const host_policy& p) { return std::max(p.adaptive.hard_max, p.concurrency); }

}  // namespace

adaptive_limit::adaptive_limit(const host_policy& policy, clock::time_point now)
    : policy_(&policy), limit_(policy.concurrency), rate_(policy.rate), last_step_(now) {}

void adaptive_limit::reconfigure(const host_policy& policy, clock::time_point now) {
    // A host that health has narrowed stays narrowed (a reload must not undo a 429);
    // one running at its configured values moves to the new ones.
    const bool narrowed = limit_ < policy_->concurrency || rate_ < policy_->rate || now < paused_until_;
    limit_ = narrowed ? std::min(limit_, policy.concurrency) : policy.concurrency;
    rate_ = narrowed ? std::min(rate_, policy.rate) : policy.rate;
    policy_ = &policy;
    last_step_ = now;
    ++epoch_;
}

std::optional<clock::duration> adaptive_limit::p95() const {
    const std::size_t n = std::min<std::size_t>(samples_, window_size);
    if (n == 0) return std::nullopt;
    if (p95_us_ == 0) {
        std::array<std::uint32_t, window_size> copy = window_;
        const std::size_t k = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(n))) - 1;
        std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(k),
                         copy.begin() + static_cast<std::ptrdiff_t>(n));
        p95_us_ = copy[k];
    }
    return std::chrono::microseconds(p95_us_);
}

void adaptive_limit::add_sample(clock::duration latency) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
    const auto sample = static_cast<std::uint32_t>(std::clamp<long long>(us, 1, std::numeric_limits<std::uint32_t>::max()));
    auto& slot = window_[samples_ % window_size];
    // In a full window, replacing a value below p95 by another below it (or above by
    // above) leaves p95 where it was: most samples do, and skip the nth_element.
    const bool same_side = samples_ >= window_size &&
                           ((slot < p95_us_ && sample < p95_us_) || (slot > p95_us_ && sample > p95_us_));
    if (!same_side) p95_us_ = 0;
    slot = sample;
    // 2^32 and 2 x window_size are both multiples of window_size: the ring goes on.
    if (++samples_ == 0) samples_ = 2 * window_size;
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
    ++consecutive_incidents_;
    last_incident_ = now;

    const double doublings = std::min<double>(consecutive_incidents_ - 1, 62);
    const double base = std::min(std::chrono::duration<double>(backoff.initial).count() * std::exp2(doublings),
                                 std::chrono::duration<double>(backoff.max).count());
    const double jittered = base * (1.0 + backoff.jitter * (2.0 * random() - 1.0));
    const auto waited = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(jittered));
    paused_until_ = std::max(paused_until_, now + std::max(waited, asked));

    limit_ = 1;
    rate_ = std::max(rate_ / 2, policy_->rate * min_rate_share);
    last_step_ = paused_until_;
    last_rate_step_ = paused_until_;
    collapse_epoch_ = ++epoch_;
    return limit_change::collapse;
}

limit_change adaptive_limit::on_response(const health_signal& s, clock::time_point now) {
    limit_change change = limit_change::none;
    const auto p = p95();
    if (policy_->adaptive.enabled && p && samples_ >= min_samples) {
        const double latency = std::chrono::duration<double>(s.latency).count();
        const double p95s = std::chrono::duration<double>(*p).count();
        const bool fast = latency < grow_below * p95s || (limit_ < policy_->concurrency && latency <= p95s);
        if (latency > shrink_above * p95s) {
            if (s.epoch >= epoch_ && limit_ > 1) {
                --limit_;
                ++epoch_;
                last_step_ = now;
                change = limit_change::down;
            }
        } else if (fast && now - last_step_ >= policy_->adaptive.grow_interval && limit_ < ceiling(*policy_) &&
                   now >= paused_until_) {
            ++limit_;
            last_step_ = now;
            change = limit_change::up;
        }
    }
    add_sample(s.latency);
    return change;
}

bool adaptive_limit::tick(clock::time_point now) {
    if (now < paused_until_ || now - last_rate_step_ < policy_->adaptive.grow_interval) return false;
    // Without latency adaptation nothing else would ever undo a collapse: the limit
    // steps back toward its configured value with the rate.
    const bool limit_back = !policy_->adaptive.enabled && limit_ < policy_->concurrency;
    if (rate_ >= policy_->rate && !limit_back) return false;
    rate_ = std::min(policy_->rate, rate_ * 2);
    if (limit_back) ++limit_;
    last_rate_step_ = now;
    return true;
}

}  // namespace politeproxy
