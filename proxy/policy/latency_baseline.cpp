#include "politeproxy/policy/latency_baseline.hpp"

#include <algorithm>
#include <cmath>

namespace politeproxy {
namespace {

constexpr double band_floor = 0.05;    // a block this close to the baseline is no-load
constexpr double band_errors = 1.5;    // ... or within this many standard errors
constexpr double faster_floor = 0.20;  // a block this far below: the host became faster
constexpr double faster_errors = 3.0;
constexpr double follow = 1.0 / 8;       // share of the way a no-load block moves it
constexpr double follow_faster = 1.0 / 4;
constexpr double age = 1.0 / 64;         // share of the way a slower block moves it

}  // namespace

void latency_baseline::add(clock::duration latency) {
    const double x = std::chrono::duration<double>(latency).count();
    sum_ += x;
    squares_ += x * x;
    if (++in_block_ < block_size) return;
    const double n = block_size;
    const double mean = sum_ / n;
    const double variance = std::max(0.0, (squares_ - sum_ * mean) / (n - 1));
    add_block(mean, mean > 0 ? std::sqrt(variance / n) / mean : 0.0);
    sum_ = squares_ = 0;
    in_block_ = 0;
}

void latency_baseline::add_block(double mean, double relative_error) {
    if (blocks_ < warm_blocks) {
        ++blocks_;
        baseline_ += (mean - baseline_) / blocks_;
        return;
    }
    const double band = std::max(band_floor, band_errors * relative_error);
    const double faster = std::max(faster_floor, faster_errors * relative_error);
    const double share = mean > baseline_ * (1 + band)     ? age
                         : mean < baseline_ * (1 - faster) ? follow_faster
                                                           : follow;
    baseline_ += (mean - baseline_) * share;
}

std::optional<double> latency_baseline::seconds() const {
    if (blocks_ < warm_blocks) return std::nullopt;
    return baseline_;
}

}  // namespace politeproxy
