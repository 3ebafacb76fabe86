#pragma once
#include "politeproxy/base/clock.hpp"

#include <cstddef>
#include <cstdint>

namespace politeproxy {

/// The latency at two adjacent limits, a and a + 1, and what it says about a + 1: does
/// one more request in flight find the origin's workers busy and wait?
///
/// Little's law in a closed loop. With a + 1 at most the origin's capacity C, nothing of
/// ours waits at either level: the latency is the service time at both. With a at least
/// C, every request beyond C waits: the latency grows with the limit, by (a + 1) / a
/// from a to a + 1. So the ratio of the two means tells the cases apart without the long
/// no-load baseline, which a standing queue drags along and whose noise band is wide
/// under a noisy service time (one queued request at C = 4 adds 25%, inside 4 standard
/// errors of 64 exponential responses). The test is on ln(ratio) against the midpoint
/// of the two hypotheses, ln((a + 1) / a) / 2, in standard errors of the two means:
/// `queues` above it by `errors`, `clear` below it by `errors`. Undecided, the upper
/// level is on trial until it has the responses that put the midpoint one standard
/// error from either hypothesis (cv^2 / midpoint^2, 16 to `decide_by`); then the side of
/// the midpoint decides. That is wrong about one time in six, and more often at the
/// `decide_by` cap (a clear step at L >= 5 under exponential service goes back about a
/// quarter of the time at 96): the price of trials short enough to leave small queues.
/// A level found clear stays under the `errors` test for 4 x `decide_by` responses.
///
/// Each level's mean and variance are over every response to a request sent at it while
/// the pair lasts (Welford, unweighted). The pair follows growth one step at a time (a
/// growth from a + 1 makes a + 1 the new lower level; back down to a keeps a's
/// responses); any other change starts a new pair at the new level.
///
/// Sans-io, 24 bytes, no locking (the owner serialises calls).
class adjacent_levels {
public:
    enum class verdict : std::uint8_t { open, queues, clear };

    /// The limit changed from `from` to `to`.
    void moved(std::size_t from, std::size_t to);

    /// A response to a request sent at `level` (ignored unless it is one of the pair).
    void add(std::size_t level, clock::duration latency);

    /// The upper level's verdict: `queues` or `clear` beyond `errors` standard errors; on
    /// trial (until its first `clear`), also by the side of the midpoint once the upper
    /// level has enough responses (at most `decide_by`).
    verdict judge(double errors, std::uint32_t decide_by);

    /// The lower level of the pair; 0 when there is none.
    std::size_t lower() const { return lower_; }
    /// Responses seen at the upper level.
    std::uint32_t upper_count() const { return upper_n_; }

private:
    struct level {
        float mean = 0;
        float squares = 0;  ///< sum of squared deviations from the mean (Welford's M2)
    };
    static void add(level& l, std::uint16_t& n, double x);
    static double spread(const level& l, std::uint16_t n);
    static constexpr std::uint16_t max_level = 0xffff;

    level lower_level_;
    level upper_;
    std::uint16_t lower_n_ = 0;
    std::uint16_t upper_n_ = 0;
    std::uint16_t lower_ = 0;
    bool settled_ = false;  ///< the upper level was found clear: no more trial
};

}  // namespace politeproxy
