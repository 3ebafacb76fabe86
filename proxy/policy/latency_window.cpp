#include "politeproxy/policy/latency_window.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace politeproxy {

void latency_window::add(clock::duration latency) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
    const auto sample = static_cast<std::uint32_t>(std::clamp<long long>(us, 1, std::numeric_limits<std::uint32_t>::max()));
    if (ring_.size() < size) {  // filling: nothing is replaced
        ring_.push_back(sample);
        p95_us_ = 0;
        ++count_;
        return;
    }
    auto& slot = ring_[count_ % size];
    // In a full window, replacing a value below p95 by another below it (or above by
    // above) leaves p95 where it was: most samples do, and skip the nth_element.
    const bool same_side = (slot < p95_us_ && sample < p95_us_) || (slot > p95_us_ && sample > p95_us_);
    if (!same_side) p95_us_ = 0;
    slot = sample;
    // 2^32 and 2 x size are both multiples of size: the ring goes on.
    if (++count_ == 0) count_ = 2 * size;
}

void latency_window::clear() {
    ring_.clear();
    count_ = 0;
    p95_us_ = 0;
}

std::optional<clock::duration> latency_window::p95() const {
    const std::size_t n = held();
    if (n == 0) return std::nullopt;
    if (p95_us_ == 0) {
        std::array<std::uint32_t, size> copy;
        std::copy(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(n), copy.begin());
        const std::size_t k = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(n))) - 1;
        std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(k),
                         copy.begin() + static_cast<std::ptrdiff_t>(n));
        p95_us_ = copy[k];
    }
    return std::chrono::microseconds(p95_us_);
}

void epoch_samples::add(clock::duration latency) {
    const double x = std::chrono::duration<double>(latency).count();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
    last_[count_ % median_of] = static_cast<std::uint32_t>(std::clamp<long long>(us, 1, std::numeric_limits<std::uint32_t>::max()));
    if (count_ < std::numeric_limits<std::uint32_t>::max()) ++count_;
    // Equal weights up to `span` samples, then exponential (West's incremental form).
    const double weight = 1.0 / std::min<double>(count_, span);
    const double delta = x - mean_;
    mean_ = static_cast<float>(mean_ + weight * delta);
    variance_ = static_cast<float>((1 - weight) * (variance_ + weight * delta * delta));
}

void epoch_samples::clear() { *this = epoch_samples{}; }

latency_mean epoch_samples::mean() const {
    if (count_ < 2) return {};
    // An exponential average with weight 1/span carries as much as 2 x span - 1 samples.
    const double n = std::min<double>(count_, 2.0 * span - 1);
    const double sample_variance = variance_ * n / (n - 1);
    return {mean_, mean_ > 0 ? std::sqrt(sample_variance / n) / mean_ : 0.0};
}

clock::duration epoch_samples::median() const {
    const std::size_t n = std::min<std::size_t>(count_, median_of);
    if (n == 0) return {};
    std::array<std::uint32_t, median_of> copy = last_;
    std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(n / 2), copy.begin() + static_cast<std::ptrdiff_t>(n));
    return std::chrono::microseconds(copy[n / 2]);
}

}  // namespace politeproxy
