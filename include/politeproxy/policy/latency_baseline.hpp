#pragma once
#include "politeproxy/base/clock.hpp"

#include <cstdint>
#include <optional>

namespace politeproxy {

/// A host's no-load latency: what time to response headers is when nothing of ours
/// waits at the origin, the reference a standing queue is measured against.
///
/// Algorithm. Samples are taken in blocks of `block_size`; each block gives a mean and a
/// standard error (se, relative). The first `warm_blocks` blocks are averaged. After
/// that a block whose mean lies within the noise band of the baseline (above it by at
/// most max(5%, 1 se)) moves the baseline an eighth of the way towards it; one below it
/// by more than max(20%, 3 se) (the host became faster) moves it a quarter of the way;
/// one further above (queueing, or a host that became slower) only ages it, by 1/64 of
/// the way. So a standing queue barely moves the reference it is measured against,
/// while a host that became slower for good has a new baseline after some tens of
/// blocks. Why not the minimum: with a heavy-tailed service time the minimum of a
/// window is a fraction of the typical latency, and every sample would look queued.
///
/// Sans-io, 40 bytes, no locking (the owner serialises calls).
class latency_baseline {
public:
    static constexpr std::uint32_t block_size = 32;
    static constexpr std::uint32_t warm_blocks = 3;

    void add(clock::duration latency);

    /// The baseline once `warm_blocks` blocks have been seen; nullopt before.
    std::optional<double> seconds() const;

private:
    void add_block(double mean, double relative_error);

    double baseline_ = 0;
    double sum_ = 0;
    double squares_ = 0;
    std::uint32_t in_block_ = 0;
    std::uint32_t blocks_ = 0;
};

}  // namespace politeproxy
