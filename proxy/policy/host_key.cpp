#include "politeproxy/policy/host_key.hpp"

#include "politeproxy/base/char_class.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace politeproxy {

namespace {

std::string_view strip_brackets(std::string_view host) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return host;
}

std::string_view strip_trailing_dots(std::string_view host) {
    while (!host.empty() && host.back() == '.') host.remove_suffix(1);
    return host;
}

// One part of an inet_aton address: "0x" hex, "0" octal, or decimal; no sign, no
// empty part, at most 32 bits.
std::optional<std::uint64_t> aton_part(std::string_view s) {
    unsigned base = 10;
    if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    } else if (s.size() > 1 && s[0] == '0') {
        base = 8;
        s.remove_prefix(1);
    }
    if (s.empty() || s.size() > 32) return std::nullopt;
    std::uint64_t v = 0;
    for (char c : s) {
        const int d = hex_value(static_cast<unsigned char>(c));
        if (d < 0 || static_cast<unsigned>(d) >= base) return std::nullopt;
        v = v * base + d;
        if (v > 0xffffffffu) return std::nullopt;
    }
    return v;
}

std::optional<std::uint32_t> parse_ipv4_any(std::string_view s) {
    std::uint64_t parts[4];
    std::size_t n = 0;
    for (;;) {
        const std::size_t dot = s.find('.');
        if (n == 4) return std::nullopt;
        const auto v = aton_part(s.substr(0, dot));
        if (!v) return std::nullopt;
        parts[n++] = *v;
        if (dot == std::string_view::npos) break;
        s.remove_prefix(dot + 1);
    }
    // Every part but the last is one byte; the last fills the bytes left.
    std::uint64_t address = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
        if (parts[i] > 0xff) return std::nullopt;
        address |= parts[i] << (8 * (3 - i));
    }
    const unsigned last_bits = 8 * static_cast<unsigned>(5 - n);
    if (parts[n - 1] >> last_bits) return std::nullopt;
    return static_cast<std::uint32_t>(address | parts[n - 1]);
}

bool numeric_label(std::string_view label) {
    if (label.size() > 1 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')) {
        label.remove_prefix(2);
        for (char c : label)
            if (hex_value(static_cast<unsigned char>(c)) < 0) return false;
        return true;
    }
    for (char c : label)
        if (c < '0' || c > '9') return false;
    return !label.empty();
}

}  // namespace

std::optional<ip_bytes> parse_host_address(std::string_view host) {
    host = strip_brackets(host);
    if (host.find(':') == std::string_view::npos) {
        const auto v4 = parse_ipv4_any(strip_trailing_dots(host));
        if (!v4) return std::nullopt;
        return ipv4_bytes(*v4);
    }
    return parse_ip(host);  // IPv6 text, as it holds a colon
}

std::string address_text(const ip_bytes& address) {
    static const ip_network mapped = *parse_network("::ffff:0:0/96");
    if (mapped.contains(address)) {  // dotted decimal by hand: inet_ntop formats IPv4 with sprintf
        char text[16];
        char* p = text;
        for (std::size_t i = 12; i < 16; ++i) {
            p = std::to_chars(p, text + sizeof text, address[i]).ptr;
            if (i < 15) *p++ = '.';
        }
        return std::string(text, p);
    }
    char text[INET6_ADDRSTRLEN];
    in6_addr v6;
    std::memcpy(&v6, address.data(), address.size());
    inet_ntop(AF_INET6, &v6, text, sizeof text);
    return text;
}

std::string authority_of(std::string_view host, std::uint16_t port) {
    std::string out;
    if (host.find(':') != std::string_view::npos) ((out += '[') += host) += ']';
    else out += host;
    return (out += ':') += std::to_string(port);
}

std::string network_text(const ip_network& network) {
    static const ip_network mapped = *parse_network("::ffff:0:0/96");
    const bool v4 = mapped.contains(network.base) && network.prefix >= 96;
    return address_text(network.base) + "/" + std::to_string(v4 ? network.prefix - 96 : network.prefix);
}

namespace {

std::string lower_name(std::string_view host) {
    std::string key(strip_trailing_dots(strip_brackets(host)));
    for (char& c : key)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return key;
}

}  // namespace

std::string host_key(std::string_view host) {
    if (const auto address = parse_host_address(host)) return address_text(*address);
    return lower_name(host);
}

std::optional<named_host> read_host(std::string_view host) {
    if (auto address = parse_host_address(host)) return named_host{address_text(*address), address};
    if (!valid_dns_name(host)) return std::nullopt;
    return named_host{lower_name(host), std::nullopt};
}

bool valid_host_name(std::string_view host) { return parse_host_address(host) || valid_dns_name(host); }

bool valid_dns_name(std::string_view host) {
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    if (host.empty() || host.size() > 253) return false;
    std::size_t label = 0;
    for (char c : host) {
        if (c == '.') {
            if (label == 0) return false;
            label = 0;
            continue;
        }
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
        if (!ok || ++label > 63) return false;
    }
    // A numeric last label makes it an address or nothing (as WHATWG URL hosts).
    return label > 0 && !numeric_label(host.substr(host.size() - label));
}

bool host_matches(std::string_view pattern, std::string_view host) {
    if (pattern.starts_with("*.")) {
        const std::string_view suffix = pattern.substr(1);  // ".example.com"
        return host.size() > suffix.size() && host.ends_with(suffix);
    }
    return pattern == host;
}

}  // namespace politeproxy
