#include "politeproxy/policy/token_bucket.hpp"

#include <algorithm>
#include <cmath>

namespace politeproxy {

token_bucket::token_bucket(double rate_per_s, double burst, clock::time_point now)
    : rate_(rate_per_s), burst_(std::max(1.0, burst)), tokens_(burst_), updated_(now) {}

double token_bucket::tokens_at(clock::time_point now) const {
    if (now <= updated_) return tokens_;
    const double elapsed = std::chrono::duration<double>(now - updated_).count();
    return std::min(burst_, tokens_ + elapsed * rate_);
}

void token_bucket::refill(clock::time_point now) {
    tokens_ = tokens_at(now);
    updated_ = std::max(updated_, now);
}

bool token_bucket::try_take(clock::time_point now) {
    refill(now);
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
}

clock::duration token_bucket::wait_for_token(clock::time_point now) const {
    const double missing = 1.0 - tokens_at(now);
    if (missing <= 0.0) return clock::duration::zero();
    // Round up so that waking at now + wait always finds the whole token.
    const auto ns = std::ceil(missing / rate_ * 1e9);
    return std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(
               static_cast<std::chrono::nanoseconds::rep>(ns))) +
           clock::duration(1);
}

bool token_bucket::full(clock::time_point now) const { return tokens_at(now) >= burst_; }

void token_bucket::reconfigure(double rate_per_s, double burst, clock::time_point now) {
    refill(now);
    rate_ = rate_per_s;
    burst_ = std::max(1.0, burst);
    tokens_ = std::min(tokens_, burst_);
}

}  // namespace politeproxy
