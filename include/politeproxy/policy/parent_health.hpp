#pragma once
// Whether a parent proxy is worth trying (SPEC.md `parents`): `fail_after` consecutive
// failures of the parent itself (it refused or dropped the connection, or closed or timed
// out without an answer) mark it down for `retry_after`; each incident that follows
// another without a quiet spell doubles the time (up to 64x), jittered by up to 10%; a
// quiet spell (no failure for 4 times the base time since the last one, once it is up
// again) forgives the doubling. A down parent whose time is up is on trial: usable, but
// not counted up (parent_up 0) until it answers; one answer and it is up, one failure and
// it is down again. What a parent answers about the destination (its 502, 503
// or 504) is no failure of the parent's (Squid PR#1772). Sans-io: time comes in.
#include "politeproxy/base/clock.hpp"

#include <cstdint>

namespace politeproxy {

class parent_health {
public:
    parent_health(unsigned fail_after, clock::duration retry_after, std::uint64_t seed = 1)
        : fail_after_(fail_after < 1 ? 1 : fail_after), retry_after_(retry_after), rng_(seed | 1) {}

    /// Not marked down at `now` (it may be on trial: its down time is up).
    bool usable(clock::time_point now) const { return now >= down_until_; }
    /// Counted as up: never marked down, or answered since it was tried again.
    bool up(clock::time_point now) const { return usable(now) && !on_trial_; }
    /// When a down parent is tried again.
    clock::time_point down_until() const { return down_until_; }

    /// The parent itself failed (connect, or no answer): true when this marked it down.
    bool failed(clock::time_point now);
    /// The parent carried a request or a tunnel to an answer.
    void answered(clock::time_point now);

private:
    clock::duration next_down_time(clock::time_point now);

    unsigned fail_after_;
    clock::duration retry_after_;
    std::uint64_t rng_;
    unsigned consecutive_ = 0;
    unsigned incidents_ = 0;  ///< down incidents since the last quiet spell
    bool on_trial_ = false;   ///< marked down once; up again after an answer
    clock::time_point down_until_ = clock::time_point::min();
    clock::time_point last_failure_ = clock::time_point::min();
};

}  // namespace politeproxy
