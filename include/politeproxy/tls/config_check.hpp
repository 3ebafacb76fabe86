#pragma once
// The configuration as the proxy takes it: what the config layer reads and checks, then
// what only the TLS layer can check (the interception CA's files).
#include "politeproxy/config/config_load.hpp"

#include <string>
#include <string_view>

namespace politeproxy::tls {

/// `c`, unless tls.mode is intercept and its CA (tls.ca_cert, tls.ca_key) does not load:
/// then "<source>: tls: <why>", as the loader words its own failures.
loaded<config> check_interception_ca(loaded<config> c, std::string_view source);

/// load_config_file(path), then check_interception_ca(): at start, for --check, on SIGHUP.
loaded<config> load_config_checked(const std::string& path);

}  // namespace politeproxy::tls
