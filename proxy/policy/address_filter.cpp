#include "politeproxy/policy/address_filter.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace politeproxy {
namespace {

constexpr unsigned ipv4_mapped_prefix = 96;

// Named classes of destination that crawlers have no business reaching by default.
// "!" marks a globally reachable hole in a wider range (IANA special-purpose registries).
constexpr std::string_view private_networks[] = {
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",   // private-use, shared
    "192.0.0.0/24", "!192.0.0.9/32", "!192.0.0.10/32",                 // IETF protocol assignments
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",               // documentation
    "198.18.0.0/15", "192.88.99.0/24", "240.0.0.0/4", "224.0.0.0/4",   // benchmarking, 6to4 relay, reserved, multicast
    "fc00::/7", "fec0::/10", "ff00::/8", "100::/64", "::/96",           // ULA, site-local, multicast, discard, IPv4-compatible
    "64:ff9b:1::/48", "2001:db8::/32", "3fff::/20", "5f00::/16",        // NAT64 local-use, documentation, SRv6
    "2001::/23", "!2001:1::1/128", "!2001:1::2/128", "!2001:1::3/128",  // IETF assignments (TEREDO 2001::/32 within)
    "!2001:3::/32", "!2001:4:112::/48", "!2001:20::/28", "!2001:30::/28"};
constexpr std::string_view loopback_networks[] = {"127.0.0.0/8", "0.0.0.0/8", "::1/128", "::/128"};
constexpr std::string_view link_local_networks[] = {"169.254.0.0/16", "fe80::/10"};

// The IPv4 destination an IPv6 address carries, if it is one of the forms that do.
std::optional<ip_bytes> embedded_ipv4(const ip_bytes& a) {
    static const ip_network nat64 = *parse_network("64:ff9b::/96");
    static const ip_network six_to_four = *parse_network("2002::/16");
    static const ip_network compatible = *parse_network("::/96");
    static const ip_network unspecified_and_loopback = *parse_network("::/127");  // not IPv4-compatible (RFC 4291)
    std::size_t at;
    if (nat64.contains(a) || (compatible.contains(a) && !unspecified_and_loopback.contains(a))) at = 12;
    else if (six_to_four.contains(a)) at = 2;
    else return std::nullopt;
    ip_bytes v4 = ipv4_bytes(0);
    std::copy(a.begin() + static_cast<std::ptrdiff_t>(at), a.begin() + static_cast<std::ptrdiff_t>(at) + 4, v4.begin() + 12);
    return v4;
}

// Denied when an entry contains the address and no hole of the entry's own class,
// narrower than the entry, does.
bool denied_by(const std::vector<ip_network>& rules, const ip_bytes& address) {
    return std::any_of(rules.begin(), rules.end(), [&](const ip_network& entry) {
        if (entry.exception || !entry.contains(address)) return false;
        return std::none_of(rules.begin(), rules.end(), [&](const ip_network& hole) {
            return hole.exception && hole.group == entry.group && hole.prefix > entry.prefix && hole.contains(address);
        });
    });
}

}  // namespace

ip_bytes ipv4_bytes(std::uint32_t host_order) {
    ip_bytes b{};
    b[10] = 0xff;
    b[11] = 0xff;
    b[12] = static_cast<std::uint8_t>(host_order >> 24);
    b[13] = static_cast<std::uint8_t>(host_order >> 16);
    b[14] = static_cast<std::uint8_t>(host_order >> 8);
    b[15] = static_cast<std::uint8_t>(host_order);
    return b;
}

std::optional<ip_bytes> parse_ip(std::string_view text) {
    const std::string s(text);
    in_addr v4{};
    if (inet_pton(AF_INET, s.c_str(), &v4) == 1) return ipv4_bytes(ntohl(v4.s_addr));
    in6_addr v6{};
    if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
        ip_bytes b{};
        std::memcpy(b.data(), &v6, b.size());
        return b;
    }
    return std::nullopt;
}

bool ip_network::contains(const ip_bytes& address) const {
    // Whole bytes compared at once, then the bits of the one byte the prefix ends in.
    const std::size_t whole = prefix / 8;
    if (std::memcmp(address.data(), base.data(), whole) != 0) return false;
    const unsigned rest = prefix % 8;
    if (rest == 0) return true;
    const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
    return (address[whole] & mask) == (base[whole] & mask);
}

std::optional<ip_network> parse_network(std::string_view text) {
    const auto slash = text.find('/');
    const auto address = parse_ip(text.substr(0, slash));
    if (!address) return std::nullopt;
    const bool v4 = text.substr(0, slash).find(':') == std::string_view::npos;
    const unsigned max_prefix = v4 ? 32 : 128;
    unsigned prefix = max_prefix;
    if (slash != std::string_view::npos) {
        const std::string_view digits = text.substr(slash + 1);
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
        if (ec != std::errc{} || end != digits.data() + digits.size() || prefix > max_prefix)
            return std::nullopt;
    }
    return ip_network{*address, v4 ? prefix + ipv4_mapped_prefix : prefix};
}

std::optional<std::string> address_filter::expand(std::string_view entry,
                                                  std::vector<ip_network>& out) {
    auto add_all = [&out](auto const& list, std::uint8_t group) {
        for (std::string_view n : list) {
            const bool hole = n.starts_with('!');
            out.push_back(*parse_network(hole ? n.substr(1) : n));
            out.back().exception = hole;
            out.back().group = group;
        }
    };
    if (entry == "private") add_all(private_networks, 1);
    else if (entry == "loopback") add_all(loopback_networks, 2);
    else if (entry == "link_local") add_all(link_local_networks, 3);
    else if (auto n = parse_network(entry)) out.push_back(*n);
    else return std::string(entry);
    return std::nullopt;
}

bool any_contains(const std::vector<ip_network>& networks, const ip_bytes& address) {
    for (const auto& n : networks)
        if (n.contains(address)) return true;
    return false;
}

bool own_listeners::contains(const ip_bytes& address, std::uint16_t port) const {
    static const ip_network unspecified[] = {*parse_network("0.0.0.0/8"), *parse_network("::/128")};
    static const ip_network loopback[] = {*parse_network("127.0.0.0/8"), *parse_network("::1/128")};
    const auto in = [&address](const auto& networks) {
        return std::any_of(std::begin(networks), std::end(networks), [&](const ip_network& n) { return n.contains(address); });
    };
    for (const listener& l : bound) {
        if (l.port != port) continue;
        if (address == l.address || in(unspecified)) return true;
        if (l.any && (in(loopback) || std::find(local.begin(), local.end(), address) != local.end())) return true;
    }
    return false;
}

bool address_filter::permitted(const ip_bytes& address) const {
    if (any_contains(allow, address)) return true;
    if (denied_by(deny, address)) return false;
    const auto carried = embedded_ipv4(address);
    return !carried || any_contains(allow, *carried) || !denied_by(deny, *carried);
}

}  // namespace politeproxy
