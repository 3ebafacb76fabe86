#pragma once
#include <string>
#include <string_view>

namespace politeproxy {

/// The key a host's limits apply to: the host name lower-cased, without port or
/// trailing dot (IPv6 literals keep their brackets off). Empty when `host` is empty.
std::string host_key(std::string_view host);

/// True when `host` (a host key) matches `pattern`: an exact name, or "*.suffix" for
/// every name strictly under suffix.
bool host_matches(std::string_view pattern, std::string_view host);

}  // namespace politeproxy
