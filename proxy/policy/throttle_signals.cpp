#include "politeproxy/policy/throttle_signals.hpp"

#include "politeproxy/base/char_class.hpp"

#include <regex>

namespace politeproxy {

/// A header rule's pattern, compiled once when the config is read. `__polynomial`
/// (libstdc++) runs it as a Thompson NFA: time linear in the value, whatever the
/// operator's pattern, and no recursion a long value could exhaust the stack with.
struct compiled_pattern {
    std::regex regex;
};

std::optional<std::string> throttle_signals::make_rule(std::string_view name, std::string_view pattern,
                                                       header_rule& out) {
    out.name = lower_case(name);
    out.pattern = std::string(pattern);
    try {
        auto compiled = std::make_shared<compiled_pattern>();
        compiled->regex = std::regex(out.pattern, std::regex::ECMAScript | std::regex::nosubs |
                                                      std::regex_constants::__polynomial);
        out.compiled = std::move(compiled);
    } catch (const std::regex_error& e) {
        return std::string("not a regular expression (") + e.what() + ")";
    }
    return std::nullopt;
}

bool throttle_signals::matches(const header_rule& rule, std::string_view value) {
    if (value.empty() || !rule.compiled) return false;
    value = value.substr(0, max_matched_bytes);
    return std::regex_search(value.begin(), value.end(), rule.compiled->regex);
}

}  // namespace politeproxy
