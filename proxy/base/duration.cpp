#include "politeproxy/base/duration.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace politeproxy {

std::optional<clock::duration> parse_duration(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() &&
           ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.'))
        ++digits;
    if (digits == 0) return std::nullopt;
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
    if (ec != std::errc{} || end != text.data() + digits || !std::isfinite(value))
        return std::nullopt;
    const std::string_view unit = text.substr(digits);
    double seconds_per_unit = 0;
    if (unit == "ms") seconds_per_unit = 1e-3;
    else if (unit == "s") seconds_per_unit = 1;
    else if (unit == "m") seconds_per_unit = 60;
    else if (unit == "h") seconds_per_unit = 3600;
    else return std::nullopt;
    const double seconds = value * seconds_per_unit;
    if (seconds > 1e9) return std::nullopt;  // beyond any sane bound, and overflow-safe
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

std::string format_duration(clock::duration d) {
    using namespace std::chrono;
    const auto ms = duration_cast<milliseconds>(d).count();
    char buf[48];
    if (ms % 3'600'000 == 0 && ms != 0) std::snprintf(buf, sizeof buf, "%lldh", ms / 3'600'000LL);
    else if (ms % 60'000 == 0 && ms != 0) std::snprintf(buf, sizeof buf, "%lldm", ms / 60'000LL);
    else if (ms % 1000 == 0) std::snprintf(buf, sizeof buf, "%llds", ms / 1000LL);
    else std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
    return buf;
}

}  // namespace politeproxy
