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
    settled_ = false;
    if (lower_ != 0 && to < max_level) {
        if (from == lower_ + 1u && to == lower_) return;  // back down within the pair: the lower level holds
        if (from == lower_ && to == from + 1) {           // a new trial of the upper level
            upper_ = {};
            upper_n_ = 0;
            return;
        }
        if (from == lower_ + 1u && to == from + 1) {  // up from the upper level: it becomes the lower one
            lower_level_ = upper_;
            lower_n_ = upper_n_;
            upper_ = {};
            upper_n_ = 0;
            lower_ = static_cast<std::uint16_t>(from);
            return;
        }
    }
    // Nothing to compare with: the new level, and the one above it to try later.
    *this = adjacent_levels{};
    if (to < max_level) lower_ = static_cast<std::uint16_t>(to);
}

void adjacent_levels::add(std::size_t level, clock::duration latency) {
    if (lower_ == 0) return;
    const double x = std::chrono::duration<double>(latency).count();
    if (level == lower_) add(lower_level_, lower_n_, x);
    else if (level == lower_ + 1u) add(upper_, upper_n_, x);
}

adjacent_levels::verdict adjacent_levels::judge(double errors, std::uint32_t decide_by) {
    constexpr std::uint16_t min_samples = 16;
    const double most = std::max<double>(min_samples, decide_by);
    if (lower_ == 0 || lower_n_ < min_samples || upper_n_ < min_samples) return verdict::open;
    if (lower_level_.mean <= 0 || upper_.mean <= 0) return verdict::open;
    // A level found clear and held for 4 x `decide_by` more responses is left to the
    // baseline test: the lower level's responses grow old, and with enough of them
    // any drift of the origin's latency would read as a queue.
    if (settled_ && upper_n_ >= 4 * most) return verdict::clear;
    const double midpoint = 0.5 * std::log((lower_ + 1.0) / lower_);
    const double d = std::log(static_cast<double>(upper_.mean) / lower_level_.mean) - midpoint;
    const double error = std::sqrt(spread(lower_level_, lower_n_) / lower_n_ + spread(upper_, upper_n_) / upper_n_);
    if (d > errors * error) return verdict::queues;
    if (settled_) return verdict::clear;
    // On trial: once the upper level has the responses that put the midpoint one
    // standard error from either hypothesis (cv^2 / midpoint^2, at least 16, at most
    // `decide_by`), the side of it decides. A level found clear is held to the full
    // test from then on.
    const double enough = std::clamp(spread(lower_level_, lower_n_) / (midpoint * midpoint), double{min_samples}, most);
    if (d < -errors * error || (upper_n_ >= enough && d <= 0)) {
        settled_ = true;
        return verdict::clear;
    }
    return upper_n_ >= enough ? verdict::queues : verdict::open;
}

}  // namespace politeproxy
