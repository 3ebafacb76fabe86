#include "politeproxy/policy/adjacent_levels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace politeproxy {

void adjacent_levels::add(level& l, std::uint16_t& n, double x) {
    if (n == std::numeric_limits<std::uint16_t>::max()) return;  // enough evidence: it stops growing
    ++n;
    const double delta = x - l.mean;
    const double mean = l.mean + delta / n;
    l.squares = static_cast<float>(l.squares + delta * (x - mean));
    l.mean = static_cast<float>(mean);
}

double adjacent_levels::spread(const level& l, std::uint16_t n) {  // the squared coefficient of variation
    return l.squares / (n - 1.0) / (static_cast<double>(l.mean) * l.mean);
}

void adjacent_levels::moved(std::size_t from, std::size_t to) {
    if (to < 1 || to >= max_level) {
        *this = adjacent_levels{};
        return;
    }
    const bool paired = lower_ != 0;
    settled_ = false;
    if (paired && from == lower_ + 1u && to == lower_) return;  // back down within the pair: both hold
    if (paired && from == lower_ && to == from + 1) {
        upper_ = {};  // a new trial of the upper level: what it showed before may no longer hold
        upper_n_ = 0;
        return;
    }
    if (paired && from == lower_ + 1u && to == from + 1) {
        lower_level_ = upper_;  // up from the upper level: it becomes the lower one
        lower_n_ = upper_n_;
        upper_ = {};
        upper_n_ = 0;
    } else if (paired && from == lower_ && to + 1 == from) {
        upper_ = lower_level_;  // down from the lower level: it becomes the upper one
        upper_n_ = lower_n_;
        lower_level_ = {};
        lower_n_ = 0;
    } else {
        // Nothing to compare with: the new level, and the one above it to try later.
        *this = adjacent_levels{};
        lower_ = static_cast<std::uint16_t>(to);
        return;
    }
    lower_ = static_cast<std::uint16_t>(std::min(from, to));
}

void adjacent_levels::add(std::size_t level, clock::duration latency) {
    if (lower_ == 0) return;
    const double x = std::chrono::duration<double>(latency).count();
    if (level == lower_) add(lower_level_, lower_n_, x);
    else if (level == lower_ + 1u) add(upper_, upper_n_, x);
}

adjacent_levels::verdict adjacent_levels::judge(double errors, std::uint32_t decide_by) {
    constexpr std::uint16_t min_samples = 16;
    if (lower_ == 0 || lower_n_ < min_samples || upper_n_ < min_samples) return verdict::open;
    if (lower_level_.mean <= 0 || upper_.mean <= 0) return verdict::open;
    const double midpoint = 0.5 * std::log((lower_ + 1.0) / lower_);
    const double d = std::log(static_cast<double>(upper_.mean) / lower_level_.mean) - midpoint;
    const double error = std::sqrt(spread(lower_level_, lower_n_) / lower_n_ + spread(upper_, upper_n_) / upper_n_);
    if (d > errors * error) return verdict::queues;
    if (settled_) return verdict::clear;
    // On trial: once the upper level has the responses that put the midpoint one
    // standard error from either hypothesis, the side of it decides. A level found
    // clear is held to the full test from then on.
    const double enough =
        std::clamp(spread(lower_level_, lower_n_) / (midpoint * midpoint), double{min_samples}, double(decide_by));
    if (d < -errors * error || (upper_n_ >= enough && d <= 0)) {
        settled_ = true;
        return verdict::clear;
    }
    return upper_n_ >= enough ? verdict::queues : verdict::open;
}

}  // namespace politeproxy
