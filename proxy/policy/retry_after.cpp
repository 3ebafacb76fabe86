#include "politeproxy/policy/retry_after.hpp"

#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

namespace politeproxy {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

int month_index(const char* name) {
    constexpr std::array<const char*, 12> months{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (std::size_t i = 0; i < months.size(); ++i)
        if (std::strncmp(name, months[i], 3) == 0 && name[3] == '\0') return static_cast<int>(i) + 1;
    return 0;
}

// The three HTTP-date forms; all are GMT.
std::optional<std::chrono::sys_seconds> parse_http_date(std::string_view text) {
    const std::string s(text);
    char wkday[16] = {}, mon[4] = {}, zone[4] = {}, tail = 0;
    int day = 0, year = 0, h = 0, m = 0, sec = 0;
    bool parsed = false;
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    if (std::sscanf(s.c_str(), "%3s, %2d %3s %4d %2d:%2d:%2d %3s%c", wkday, &day, mon, &year, &h, &m, &sec, zone,
                    &tail) == 8)
        parsed = std::strcmp(zone, "GMT") == 0;
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
    else if (std::sscanf(s.c_str(), "%15[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d %3s%c", wkday, &day, mon, &year, &h, &m,
                         &sec, zone, &tail) == 8) {
        parsed = std::strcmp(zone, "GMT") == 0;
        year += year < 70 ? 2000 : 1900;  // RFC 9110: a two-digit year 50+ years ahead is in the past
    }
    // asctime: "Sun Nov  6 08:49:37 1994"
    else if (std::sscanf(s.c_str(), "%3s %3s %2d %2d:%2d:%2d %4d%c", wkday, mon, &day, &h, &m, &sec, &year, &tail) ==
             7)
        parsed = true;
    if (!parsed) return std::nullopt;
    const int month = month_index(mon);
    const std::chrono::year_month_day ymd{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                                          std::chrono::day{static_cast<unsigned>(day)}};
    if (month == 0 || !ymd.ok() || h > 23 || m > 59 || sec > 60 || h < 0 || m < 0 || sec < 0) return std::nullopt;
    return std::chrono::sys_days{ymd} + std::chrono::hours{h} + std::chrono::minutes{m} + std::chrono::seconds{sec};
}

}  // namespace

std::optional<clock::duration> parse_retry_after(std::string_view value, std::chrono::system_clock::time_point wall_now,
                                                 clock::duration cap) {
    value = trim(value);
    if (value.empty()) return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(value.front()))) {
        std::uint64_t seconds = 0;
        for (char c : value) {
            if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
            if (seconds > 1'000'000'000'000ULL) break;  // huge: the cap decides
            seconds = seconds * 10 + static_cast<std::uint64_t>(c - '0');
        }
        const auto cap_s = std::chrono::ceil<std::chrono::seconds>(cap).count();
        if (seconds >= static_cast<std::uint64_t>(cap_s)) return cap;
        return std::chrono::seconds(seconds);
    }
    const auto date = parse_http_date(value);
    if (!date) return std::nullopt;
    // In seconds: a date in the year 9999 is out of range for a nanosecond clock.
    const auto wait = *date - std::chrono::floor<std::chrono::seconds>(wall_now);
    if (wait <= std::chrono::seconds::zero()) return clock::duration::zero();
    if (wait >= std::chrono::ceil<std::chrono::seconds>(cap)) return cap;
    return std::chrono::duration_cast<clock::duration>(wait);
}

}  // namespace politeproxy
