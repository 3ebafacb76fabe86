#include "politeproxy/policy/wall_time.hpp"

#include <cstdio>

namespace politeproxy {
namespace {

// Exactly `width` decimal digits at `pos`, or nothing.
std::optional<int> digits(std::string_view s, std::size_t pos, std::size_t width) {
    if (pos + width > s.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = pos; i < pos + width; ++i) {
        if (s[i] < '0' || s[i] > '9') return std::nullopt;
        value = value * 10 + (s[i] - '0');
    }
    return value;
}

constexpr int first_year = 1970;
constexpr int last_year = 2200;  // nanoseconds since 1970 in 64 bits reach 2262

}  // namespace

std::optional<wall_clock::time_point> parse_timestamp(std::string_view s) {
    using namespace std::chrono;
    // YYYY-MM-DDTHH:MM:SS, fixed positions.
    const auto year_v = digits(s, 0, 4), month_v = digits(s, 5, 2), day_v = digits(s, 8, 2);
    const auto hour_v = digits(s, 11, 2), minute_v = digits(s, 14, 2), second_v = digits(s, 17, 2);
    if (!year_v || !month_v || !day_v || !hour_v || !minute_v || !second_v) return std::nullopt;
    if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
        return std::nullopt;
    const year_month_day date{year{*year_v}, month{static_cast<unsigned>(*month_v)},
                              day{static_cast<unsigned>(*day_v)}};
    // Second 60 is RFC 3339's leap second: counted as the next minute's first.
    if (!date.ok() || *year_v < first_year || *year_v > last_year || *hour_v > 23 || *minute_v > 59 ||
        *second_v > 60)
        return std::nullopt;

    std::size_t pos = 19;
    nanoseconds fraction{0};
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        const std::size_t start = pos;
        long long scale = 100'000'000;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            fraction += nanoseconds{(s[pos] - '0') * scale};
            scale /= 10;
            ++pos;
        }
        if (pos == start) return std::nullopt;
    }

    minutes offset{0};
    if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        const auto oh = digits(s, pos + 1, 2), om = digits(s, pos + 4, 2);
        if (!oh || !om || s[pos + 3] != ':' || *oh > 23 || *om > 59) return std::nullopt;
        offset = hours{*oh} + minutes{*om};
        if (s[pos] == '-') offset = -offset;
        pos += 6;
    } else {
        return std::nullopt;
    }
    if (pos != s.size()) return std::nullopt;

    const sys_seconds local = sys_days{date} + hours{*hour_v} + minutes{*minute_v} + seconds{*second_v};
    const sys_seconds utc = local - offset;  // "+01:00" is an hour ahead of UTC
    if (utc.time_since_epoch() < seconds{0}) return std::nullopt;
    return time_point_cast<wall_clock::duration>(utc) + duration_cast<wall_clock::duration>(fraction);
}

wall_clock::time_point to_millisecond(wall_clock::time_point t) {
    return std::chrono::floor<std::chrono::milliseconds>(t);
}

std::string format_timestamp(wall_clock::time_point t) {
    using namespace std::chrono;
    const auto ms = floor<milliseconds>(t);
    const auto day_start = floor<days>(ms);
    const year_month_day date{day_start};
    const hh_mm_ss time{ms - day_start};
    char out[40];
    std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  static_cast<long long>(time.hours().count()), static_cast<long long>(time.minutes().count()),
                  static_cast<long long>(time.seconds().count()), static_cast<long long>(time.subseconds().count()));
    return out;
}

}  // namespace politeproxy
