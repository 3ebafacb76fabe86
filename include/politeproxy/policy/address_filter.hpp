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
    /// In a deny list: a hole in the wider entries of the same `group` (a named class's
    /// globally reachable part).
    bool exception = false;
    /// In a deny list: the named class the entry came from (0: an entry of its own).
    std::uint8_t group = 0;
    bool contains(const ip_bytes& address) const;
};

/// "10.0.0.0/8", "::1/128", or a single address.
std::optional<ip_network> parse_network(std::string_view text);

/// The SSRF guard: an address is permitted when an allow entry contains it, else unless
/// the deny list denies it. A named class's exceptions are holes in that class's own
/// wider ranges only (never in an entry given as a network).
/// An IPv6 address that carries an IPv4 destination (NAT64 64:ff9b::/96, 6to4
/// 2002::/16, IPv4-compatible ::/96 but :: and ::1; IPv4-mapped is the IPv4 address
/// itself) is judged as that IPv4 address too, and denied when either is.
///
/// Deny entries are networks or class names:
/// - `loopback`: 127.0.0.0/8, 0.0.0.0/8, ::1/128, ::/128;
/// - `link_local`: 169.254.0.0/16, fe80::/10;
/// - `private`: every other range of the IANA IPv4 and IPv6 special-purpose address
///   registries that is not globally reachable (private-use, shared, benchmarking,
///   documentation, reserved, limited broadcast, ULA, discard-only, IPv4-compatible,
///   NAT64 local-use, TEREDO and the rest of 2001::/23 but its global parts, SRv6,
///   deprecated site-local), the 6to4 relay anycast, and IPv4 and IPv6 multicast.
class address_filter {
public:
    /// Returns the offending entry's text on error.
    static std::optional<std::string> expand(std::string_view entry, std::vector<ip_network>& out);

    std::vector<ip_network> deny;
    std::vector<ip_network> allow;

    bool permitted(const ip_bytes& address) const;
};

bool any_contains(const std::vector<ip_network>& networks, const ip_bytes& address);

/// The proxy's own listeners (the proxy and admin ports, as bound): never a destination,
/// whatever security.allow_destinations says, so no request reaches the admin API or
/// loops into the proxy port through the proxy. A listener bound to a specific address
/// is that address and port; one bound to 0.0.0.0 or :: is its port on every loopback
/// address and on each of the host's own addresses (`local`). The unspecified address
/// (0.0.0.0/8, ::, which connect to this host) with a listener's port is the listener too.
struct own_listeners {
    struct listener {
        ip_bytes address{};
        std::uint16_t port = 0;
        bool any = false;  ///< bound to 0.0.0.0 or ::
    };
    std::vector<listener> bound;
    std::vector<ip_bytes> local;  ///< the host's interface addresses (for listeners bound to any)

    bool contains(const ip_bytes& address, std::uint16_t port) const;
};

}  // namespace politeproxy
