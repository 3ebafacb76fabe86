#pragma once
// Calendar time as the admin API and its state file spell it: RFC 3339 timestamps.
// Policy code reasons in the steady `clock`; an operator's "pause until 12:00" and an
// override's expiry are dates, so they live on the system clock and are turned into
// steady deadlines only where they are applied.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

using wall_clock = std::chrono::system_clock;

/// Parses an RFC 3339 timestamp: "2026-12-05T12:00:00Z", an optional fraction
/// (".5", ".123456789"; digits past nanoseconds are dropped), "Z" or a "+01:00" / "-05:30"
/// offset; 'T' and 'Z' in either case. Years 1970..2200 only, so every accepted value fits
/// wall_clock's nanoseconds. Nothing for anything else (a space for 'T', a missing offset).
std::optional<wall_clock::time_point> parse_timestamp(std::string_view text);

/// "2026-12-05T12:00:00.000Z": UTC with milliseconds (the finer part is dropped).
std::string format_timestamp(wall_clock::time_point t);

/// `t` with what format_timestamp drops dropped: a time kept this way reads back from its
/// own text unchanged.
wall_clock::time_point to_millisecond(wall_clock::time_point t);

}  // namespace politeproxy
