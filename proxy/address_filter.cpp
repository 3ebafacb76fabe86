#include "politeproxy/address_filter.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace politeproxy {
namespace {

constexpr unsigned ipv4_mapped_prefix = 96;

// Named classes of destination that crawlers have no business reaching by default.
constexpr std::string_view private_networks[] = {"10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16",
                                                 "100.64.0.0/10", "192.0.0.0/24",  "198.18.0.0/15",
                                                 "240.0.0.0/4",   "fc00::/7"};
constexpr std::string_view loopback_networks[] = {"127.0.0.0/8", "0.0.0.0/8", "::1/128", "::/128"};
constexpr std::string_view link_local_networks[] = {"169.254.0.0/16", "fe80::/10"};

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
    unsigned bits = prefix;
    for (std::size_t i = 0; i < address.size() && bits > 0; ++i) {
        const unsigned take = bits >= 8 ? 8 : bits;
        const std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - take));
        if ((address[i] & mask) != (base[i] & mask)) return false;
        bits -= take;
    }
    return true;
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
    auto add_all = [&out](auto const& list) {
        for (std::string_view n : list) out.push_back(*parse_network(n));
    };
    if (entry == "private") add_all(private_networks);
    else if (entry == "loopback") add_all(loopback_networks);
    else if (entry == "link_local") add_all(link_local_networks);
    else if (auto n = parse_network(entry)) out.push_back(*n);
    else return std::string(entry);
    return std::nullopt;
}

bool any_contains(const std::vector<ip_network>& networks, const ip_bytes& address) {
    for (const auto& n : networks)
        if (n.contains(address)) return true;
    return false;
}

bool address_filter::permitted(const ip_bytes& address) const {
    // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last four bytes: judge that.
    static const ip_network nat64 = *parse_network("64:ff9b::/96");
    if (nat64.contains(address)) {
        ip_bytes v4 = ipv4_bytes(0);
        std::copy(address.begin() + 12, address.end(), v4.begin() + 12);
        if (!permitted(v4)) return false;
    }
    return !any_contains(deny, address) || any_contains(allow, address);
}

}  // namespace politeproxy
