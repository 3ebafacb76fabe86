#include "politeproxy/base/log.hpp"

#include <cstdio>
#include <string>

namespace politeproxy {

bool parse_log_level(std::string_view text, log_level& out) {
    constexpr std::pair<std::string_view, log_level> names[] = {
        {"trace", log_level::trace}, {"debug", log_level::debug}, {"info", log_level::info},
        {"warn", log_level::warn},   {"error", log_level::error}};
    for (const auto& [name, level] : names)
        if (name == text) {
            out = level;
            return true;
        }
    return false;
}

void logger::write(log_level l, std::string_view component, std::string_view message) const {
    if (!enabled(l)) return;
    constexpr const char* labels[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
    std::string line = labels[static_cast<int>(l)];
    line.append(" ").append(component).append(": ").append(message).append("\n");
    std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace politeproxy
