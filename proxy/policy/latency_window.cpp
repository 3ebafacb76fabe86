#include "politeproxy/policy/latency_window.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace politeproxy {

void latency_window::add(clock::duration latency) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
    const auto sample = static_cast<std::uint32_t>(std::clamp<long long>(us, 1, std::numeric_limits<std::uint32_t>::max()));
    auto& slot = ring_[count_ % size];
    // In a full window, replacing a value below p95 by another below it (or above by
    // above) leaves p95 where it was: most samples do, and skip the nth_element.
    const bool same_side =
        count_ >= size && ((slot < p95_us_ && sample < p95_us_) || (slot > p95_us_ && sample > p95_us_));
    if (!same_side) p95_us_ = 0;
    slot = sample;
    // 2^32 and 2 x size are both multiples of size: the ring goes on.
    if (++count_ == 0) count_ = 2 * size;
}

void latency_window::clear() {
    count_ = 0;
    p95_us_ = 0;
}

std::optional<clock::duration> latency_window::p95() const {
    const std::size_t n = held();
    if (n == 0) return std::nullopt;
    if (p95_us_ == 0) {
        std::array<std::uint32_t, size> copy = ring_;
        const std::size_t k = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(n))) - 1;
        std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(k),
                         copy.begin() + static_cast<std::ptrdiff_t>(n));
        p95_us_ = copy[k];
    }
    return std::chrono::microseconds(p95_us_);
}

latency_mean latency_window::mean_of_last(std::size_t n) const {
    if (held() < 2) return {};
    n = std::clamp<std::size_t>(n, 2, held());
    double sum = 0, squares = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = from_end(i) * 1e-6;
        sum += x;
        squares += x * x;
    }
    const double mean = sum / static_cast<double>(n);
    const double variance = std::max(0.0, (squares - sum * mean) / static_cast<double>(n - 1));
    return {mean, mean > 0 ? std::sqrt(variance / static_cast<double>(n)) / mean : 0.0};
}

clock::duration latency_window::median_of_last(std::size_t n) const {
    std::array<std::uint32_t, size> last{};
    if (held() == 0) return {};
    n = std::clamp<std::size_t>(n, 1, held());
    for (std::size_t i = 0; i < n; ++i) last[i] = from_end(i);
    std::nth_element(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(n / 2),
                     last.begin() + static_cast<std::ptrdiff_t>(n));
    return std::chrono::microseconds(last[n / 2]);
}

}  // namespace politeproxy
