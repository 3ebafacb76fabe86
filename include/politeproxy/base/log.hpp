#pragma once
#include <string_view>

namespace politeproxy {

enum class log_level { trace, debug, info, warn, error };

/// Parses "trace|debug|info|warn|error".
bool parse_log_level(std::string_view text, log_level& out);

/// Line-oriented logging to stderr: "LEVEL component: message". Check `enabled()` before
/// building an expensive message. Thread safety: each line is written with one call.
class logger {
public:
    explicit logger(log_level min = log_level::info) : min_(min) {}
    bool enabled(log_level l) const { return l >= min_; }
    void write(log_level l, std::string_view component, std::string_view message) const;

private:
    log_level min_;
};

}  // namespace politeproxy
