#include "politeproxy/policy/parent_health.hpp"

#include <algorithm>

namespace politeproxy {

bool parent_health::failed(clock::time_point now) {
    const bool quiet = last_failure_ != clock::time_point::min() && now - last_failure_ > 4 * retry_after_ &&
                       !on_trial_;
    if (quiet) incidents_ = 0;
    last_failure_ = now;
    ++consecutive_;
    // On trial (its down time just ended) one failure is enough.
    if (!on_trial_ && consecutive_ < fail_after_) return false;
    if (!usable(now)) return false;  // already down: requests that started before it went down
    down_until_ = now + next_down_time(now);
    on_trial_ = true;
    consecutive_ = 0;
    return true;
}

void parent_health::answered(clock::time_point now) {
    consecutive_ = 0;
    if (on_trial_ && usable(now)) on_trial_ = false;
}

clock::duration parent_health::next_down_time(clock::time_point) {
    const unsigned doublings = std::min(incidents_, 6u);
    ++incidents_;
    const clock::duration base = retry_after_ * (1u << doublings);
    // xorshift64: jitter in [0.9, 1.1) of the base.
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    const double factor = 0.9 + 0.2 * static_cast<double>(rng_ >> 11) / 9007199254740992.0;
    return std::chrono::duration_cast<clock::duration>(base * factor);
}

}  // namespace politeproxy
