#include "politeproxy/fleet/cluster_slots.hpp"

#include <array>
#include <charconv>

namespace politeproxy::fleet {
namespace {

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as in the Redis Cluster spec.
constexpr std::array<std::uint16_t, 256> crc_table = [] {
    std::array<std::uint16_t, 256> t{};
    for (unsigned i = 0; i < 256; ++i) {
        std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
        for (int bit = 0; bit < 8; ++bit) crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        t[i] = crc;
    }
    return t;
}();

std::uint16_t crc16(std::string_view bytes) {
    std::uint16_t crc = 0;
    for (const unsigned char c : bytes) crc = static_cast<std::uint16_t>((crc << 8) ^ crc_table[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

std::optional<std::uint16_t> number(std::string_view text, unsigned least, unsigned most) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value < least || value > most) return std::nullopt;
    return static_cast<std::uint16_t>(value);
}

std::optional<node_address> read_node(const redis_reply& r, const node_address& asked) {
    if (r.type != redis_reply::kind::array || r.elements.size() < 2) return std::nullopt;
    const auto& host = r.elements[0];
    const auto& port = r.elements[1];
    if (host.type != redis_reply::kind::string || port.type != redis_reply::kind::integer) return std::nullopt;
    if (port.integer < 1 || port.integer > 65535) return std::nullopt;
    node_address a{host.text, static_cast<std::uint16_t>(port.integer)};
    if (a.host.empty() || a.host == "?") a.host = asked.host;
    return a;
}

}  // namespace

std::uint16_t key_slot(std::string_view key) {
    if (const auto open = key.find('{'); open != std::string_view::npos) {
        const auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return crc16(key) & (cluster_slots - 1);
}

std::uint16_t tag_slot(std::string_view tag) {
    // "pp:{tag}:x": the tag up to its first '}' (a tag that starts with one hashes the
    // whole key, as Redis does).
    const auto close = tag.find('}');
    if (close == 0) {
        std::string key = "pp:{";
        key.append(tag);
        key += "}:x";
        return key_slot(key);
    }
    return crc16(tag.substr(0, close)) & (cluster_slots - 1);
}

std::optional<std::vector<slot_range>> read_cluster_slots(const redis_reply& r, const node_address& asked) {
    if (r.type != redis_reply::kind::array) return std::nullopt;
    std::vector<slot_range> out;
    out.reserve(r.elements.size());
    std::size_t covered = 0;
    for (const auto& range : r.elements) {
        if (range.type != redis_reply::kind::array || range.elements.size() < 3) return std::nullopt;
        const auto& first = range.elements[0];
        const auto& last = range.elements[1];
        if (first.type != redis_reply::kind::integer || last.type != redis_reply::kind::integer) return std::nullopt;
        if (first.integer < 0 || last.integer >= static_cast<long long>(cluster_slots) || first.integer > last.integer)
            return std::nullopt;
        covered += static_cast<std::size_t>(last.integer - first.integer + 1);
        if (covered > cluster_slots) return std::nullopt;  // overlapping ranges: not a map
        auto master = read_node(range.elements[2], asked);
        if (!master) return std::nullopt;
        out.push_back({static_cast<std::uint16_t>(first.integer), static_cast<std::uint16_t>(last.integer),
                       std::move(*master)});
    }
    return out;
}

std::optional<redirection> read_redirection(std::string_view error, const node_address& asked) {
    redirection r;
    if (error.starts_with("MOVED ")) r.moved = true;
    else if (!error.starts_with("ASK ")) return std::nullopt;
    error.remove_prefix(r.moved ? 6 : 4);
    const auto space = error.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const auto slot = number(error.substr(0, space), 0, cluster_slots - 1);
    const std::string_view endpoint = error.substr(space + 1);
    const auto colon = endpoint.rfind(':');  // host:port, an IPv6 host without brackets
    if (!slot || colon == std::string_view::npos) return std::nullopt;
    const auto port = number(endpoint.substr(colon + 1), 1, 65535);
    if (!port) return std::nullopt;
    std::string_view host = endpoint.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    r.slot = *slot;
    r.to = {host.empty() ? asked.host : std::string(host), *port};
    return r;
}

bool is_try_again(std::string_view error) { return error.starts_with("TRYAGAIN"); }

bool is_cluster_down(std::string_view error) { return error.starts_with("CLUSTERDOWN"); }

}  // namespace politeproxy::fleet
