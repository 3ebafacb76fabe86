#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

/// An IP address as 16 bytes; IPv4 is stored IPv4-mapped (::ffff:a.b.c.d), so one
/// network list covers both families.
using ip_bytes = std::array<std::uint8_t, 16>;

std::optional<ip_bytes> parse_ip(std::string_view text);
ip_bytes ipv4_bytes(std::uint32_t host_order);

struct ip_network {
    ip_bytes base{};
    unsigned prefix = 0;  ///< in bits of the 128-bit form
    bool contains(const ip_bytes& address) const;
};

/// "10.0.0.0/8", "::1/128", or a single address.
std::optional<ip_network> parse_network(std::string_view text);

/// The SSRF guard: an address is permitted unless a deny entry contains it and no allow
/// entry does. Deny entries are networks or the names `private`, `loopback`, `link_local`.
class address_filter {
public:
    /// Returns the offending entry's text on error.
    static std::optional<std::string> expand(std::string_view entry, std::vector<ip_network>& out);

    std::vector<ip_network> deny;
    std::vector<ip_network> allow;

    bool permitted(const ip_bytes& address) const;
};

bool any_contains(const std::vector<ip_network>& networks, const ip_bytes& address);

}  // namespace politeproxy
