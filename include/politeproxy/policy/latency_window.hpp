#pragma once
#include "politeproxy/base/clock.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace politeproxy {

/// The mean of some latency samples and its relative standard error (sd / mean / sqrt(n)):
/// how far the mean of n such samples may wander by chance.
struct latency_mean {
    double seconds = 0;
    double relative_error = 0;
};

/// The last `size` latencies (time to response headers), as a ring of microseconds.
/// Gives their exact p95 and the statistics the adaptive controller compares: mean and
/// standard error of the most recent ones, and their median.
///
/// p95 is recomputed (nth_element on a copy of 64 values) only when a new sample and the
/// one it replaces lie on different sides of it; otherwise it cannot have moved. Sans-io,
/// no locking (the owner serialises calls).
class latency_window {
public:
    static constexpr std::size_t size = 64;

    void add(clock::duration latency);
    void clear();

    /// Samples added since the last clear() (not capped at `size`).
    std::uint32_t count() const { return count_; }

    /// The exact 95th percentile of the samples held; nullopt when empty.
    std::optional<clock::duration> p95() const;

    /// Mean and standard error of the last `n` samples (at most the ones held, at least 2).
    latency_mean mean_of_last(std::size_t n) const;

    /// Median of the last `n` samples (n odd, at most the ones held).
    clock::duration median_of_last(std::size_t n) const;

private:
    std::size_t held() const { return count_ < size ? count_ : size; }
    std::uint32_t from_end(std::size_t i) const { return ring_[(count_ - 1 - i) % size]; }  ///< i = 0: newest

    std::array<std::uint32_t, size> ring_{};
    std::uint32_t count_ = 0;
    mutable std::uint32_t p95_us_ = 0;  ///< 0: not computed yet
};

}  // namespace politeproxy
