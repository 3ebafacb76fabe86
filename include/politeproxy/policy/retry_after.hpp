#pragma once
#include "politeproxy/base/clock.hpp"

#include <chrono>
#include <optional>
#include <string_view>

namespace politeproxy {

/// How long a Retry-After field value asks to wait (RFC 9110 section 10.2.3): either
/// delay-seconds or an HTTP-date (IMF-fixdate, and the obsolete RFC 850 and asctime
/// forms recipients must accept), relative to `wall_now`. A date in the past is zero.
/// Garbage gives nullopt; the caller falls back to its own backoff. Values beyond
/// `cap` are cut to `cap`.
std::optional<clock::duration> parse_retry_after(std::string_view value,
                                                 std::chrono::system_clock::time_point wall_now,
                                                 clock::duration cap);

}  // namespace politeproxy
