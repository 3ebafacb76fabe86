#pragma once
#include "politeproxy/base/clock.hpp"

namespace politeproxy {

/// A token bucket: `rate` tokens per second refill a bucket of `burst` tokens.
/// It starts full. Sans-io: time comes in as `now` and nothing blocks.
///
/// Thread safety: none; the owner (a gate) serialises access.
class token_bucket {
public:
    token_bucket(double rate_per_s, double burst, clock::time_point now);

    /// Takes one token if one is available at `now`.
    bool try_take(clock::time_point now);

    /// How long from `now` until one whole token is available (zero if one is).
    clock::duration wait_for_token(clock::time_point now) const;

    /// True when the bucket holds `burst` tokens at `now`: forgetting it loses nothing.
    bool full(clock::time_point now) const;

    /// Changes rate and size; tokens earned so far are kept (capped by the new burst).
    void reconfigure(double rate_per_s, double burst, clock::time_point now);

    double rate() const { return rate_; }

private:
    double tokens_at(clock::time_point now) const;
    void refill(clock::time_point now);

    double rate_;
    double burst_;
    double tokens_;
    clock::time_point updated_;
};

}  // namespace politeproxy
