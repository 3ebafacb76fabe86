#pragma once
#include "politeproxy/base/clock.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace politeproxy {

/// The mean of some latency samples and its relative standard error (sd / mean / sqrt(n)):
/// how far the mean of n such samples may wander by chance.
struct latency_mean {
    double seconds = 0;
    double relative_error = 0;
};

/// The last `size` latencies (time to response headers), as a ring of microseconds, and
/// their exact p95. The ring grows with its samples up to `size`: a host seen once holds
/// one (a million idle hosts, see tests/bench/host_scale_bench.py).
///
/// p95 is recomputed (nth_element on a copy of the samples held) only when a new sample and the
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

private:
    std::size_t held() const { return count_ < size ? count_ : size; }

    std::vector<std::uint32_t> ring_;  ///< min(count_, size) samples
    std::uint32_t count_ = 0;
    mutable std::uint32_t p95_us_ = 0;  ///< 0: not computed yet
};

/// The latencies of one epoch (the requests sent at one limit): their mean and its
/// standard error, weighting the first `span` samples alike and fading older ones after
/// that (weight 1/span each), as a window of about 2 x span - 1 responses would; and the
/// median of the last 5. 32 bytes where a window of 64 would take 260.
class epoch_samples {
public:
    static constexpr std::uint32_t span = 32;
    static constexpr std::size_t median_of = 5;

    void add(clock::duration latency);
    void clear();
    std::uint32_t count() const { return count_; }

    /// Mean and relative standard error; zero before two samples.
    latency_mean mean() const;

    /// Median of the last 5 samples (of fewer, before 5).
    clock::duration median() const;

private:
    float mean_ = 0;  ///< float: a million hosts hold one each (their precision is far below the noise)
    float variance_ = 0;
    std::array<std::uint32_t, median_of> last_{};  ///< microseconds, a ring
    std::uint32_t count_ = 0;
};

}  // namespace politeproxy
