#pragma once
#include "politeproxy/config/config.hpp"

#include <boost/system/result.hpp>

#include <string>
#include <string_view>

namespace politeproxy {

/// A value, or the reason (file and line) it could not be had.
template <class T>
using loaded = boost::system::result<T, std::string>;

/// Reads and validates a configuration. Errors name the file and line, and the host for
/// registry entries ("conf/x.yaml:12: host api.example.com raises concurrency above
/// defaults without a reason"). Unknown keys are errors.
loaded<config> load_config_file(const std::string& path);
loaded<config> load_config_text(std::string_view yaml, std::string source);

/// "127.0.0.1:3128", "[::1]:3128": an IP literal and a port (0 picks a free one).
loaded<listen_address> parse_listen_address(std::string_view text);

}  // namespace politeproxy
