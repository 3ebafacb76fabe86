#pragma once
#include "politeproxy/config.hpp"

#include <expected>
#include <string>
#include <string_view>

namespace politeproxy {

/// Reads and validates a configuration. Errors name the file and line, and the host for
/// registry entries ("conf/x.yaml:12: host api.example.com raises concurrency above
/// defaults without a reason"). Unknown keys are errors.
std::expected<config, std::string> load_config_file(const std::string& path);
std::expected<config, std::string> load_config_text(std::string_view yaml, std::string source);

/// "127.0.0.1:3128", "[::1]:3128": an IP literal and a port (0 picks a free one).
std::expected<listen_address, std::string> parse_listen_address(std::string_view text);

}  // namespace politeproxy
