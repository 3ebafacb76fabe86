#pragma once
#include <string>
#include <string_view>

namespace politeproxy {

/// The key a host's limits apply to: the host name lower-cased, without port or
/// trailing dot (IPv6 literals keep their brackets off). Empty when `host` is empty.
std::string host_key(std::string_view host);

/// True for a DNS name a proxy may look up: 1 to 253 characters of dot-separated labels
/// of 1 to 63 letters, digits, '-' or '_' (an optional trailing dot allowed). Anything
/// else (percent-decoded bytes, NULs, spaces) would create junk gates and metric labels,
/// or be cut short by getaddrinfo into a different name than the gate's.
bool valid_host_name(std::string_view host);

/// True when `host` (a host key) matches `pattern`: an exact name, or "*.suffix" for
/// every name strictly under suffix.
bool host_matches(std::string_view pattern, std::string_view host);

}  // namespace politeproxy
