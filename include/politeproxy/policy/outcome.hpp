#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace politeproxy {

/// How a request ended, as counted in requests_total{outcome}.
enum class outcome : std::uint8_t { ok, throttled, refused, error, timeout, rejected };
inline constexpr std::size_t outcome_count = 6;

constexpr std::string_view outcome_name(outcome o) {
    constexpr std::string_view names[outcome_count] = {"ok", "throttled", "refused",
                                                       "error", "timeout", "rejected"};
    return names[static_cast<std::size_t>(o)];
}

}  // namespace politeproxy
