#pragma once
#include "politeproxy/base/clock.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

/// Parses "250ms", "30s", "1.5m", "1h". A unit is required; negative values are refused.
std::optional<clock::duration> parse_duration(std::string_view text);

/// "30s", "1.5s", "10m": the shortest exact rendering used by --check-config.
std::string format_duration(clock::duration d);

}  // namespace politeproxy
