#pragma once
#include "politeproxy/policy/address_filter.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

/// The key a host's limits apply to: one per origin, however its address is spelled.
/// An address (any spelling parse_host_address reads) becomes its canonical text:
/// dotted decimal for IPv4 and IPv4-mapped IPv6 (the same destination), RFC 5952 text
/// for other IPv6, without brackets. A name is lower-cased, without trailing dots.
/// Empty when `host` is empty.
std::string host_key(std::string_view host);

/// An address in any spelling that resolvers accept for one (inet_aton's IPv4 forms:
/// 1 to 4 parts, each decimal, octal with a leading 0, or hex with 0x, the last part
/// filling the remaining bytes: `127.1`, `0x7f000001`, `2130706433`, `0177.0.0.01`;
/// IPv6 text, brackets optional, no zone). nullopt for names.
std::optional<ip_bytes> parse_host_address(std::string_view host);

/// The canonical text of an address (see host_key).
std::string address_text(const ip_bytes& address);
/// "host:port" (a CONNECT's authority, a listener, a parent): `host` (a host key or
/// address text, without brackets) in brackets when it is IPv6.
std::string authority_of(std::string_view host, std::uint16_t port);
/// A network as written: "10.0.0.0/8" (the IPv4 prefix length for a mapped address), "fd00::/8".
std::string network_text(const ip_network& network);

/// True for a DNS name a proxy may look up: 1 to 253 characters of dot-separated
/// labels of 1 to 63 letters, digits, '-' or '_' (an optional trailing dot allowed)
/// whose last label is not numeric (all digits, or 0x and hex: a resolver would read
/// such a name as a malformed address). Anything else (percent-decoded bytes, NULs,
/// spaces) would create junk gates and metric labels, or be cut short by getaddrinfo
/// into a different name than the gate's.
bool valid_dns_name(std::string_view host);

/// A host as a request names it, read once: its key (host_key) and, when it is an
/// address, the address.
struct named_host {
    std::string key;
    std::optional<ip_bytes> address;
};

/// The host, when it is an address (parse_host_address) or a valid_dns_name; nullopt
/// for anything else.
std::optional<named_host> read_host(std::string_view host);

/// True for what read_host accepts.
bool valid_host_name(std::string_view host);

/// True when `host` (a host key) matches `pattern`: an exact name, or "*.suffix" for
/// every name strictly under suffix.
bool host_matches(std::string_view pattern, std::string_view host);

}  // namespace politeproxy
