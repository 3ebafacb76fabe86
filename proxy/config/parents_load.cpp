// parents: and routes: (SPEC.md "Configuration"): the parent proxies and which
// destinations go through them.
#include "config_reader.hpp"

#include "politeproxy/policy/host_key.hpp"

#include <algorithm>
#include <charconv>

namespace politeproxy::config_detail {
namespace {

std::optional<std::string> percent_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        unsigned value = 0;
        if (i + 2 >= s.size()) return std::nullopt;
        const auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
        if (ec != std::errc{} || end != s.data() + i + 3) return std::nullopt;
        out += static_cast<char>(value);
        i += 2;
    }
    return out;
}

std::string base64(std::string_view in) {
    static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                           static_cast<unsigned char>(in[i + 2]);
        for (int shift : {18, 12, 6, 0}) out += alphabet[(v >> shift) & 63];
    }
    if (const std::size_t rest = in.size() - i; rest > 0) {
        unsigned v = static_cast<unsigned char>(in[i]) << 16;
        if (rest == 2) v |= static_cast<unsigned char>(in[i + 1]) << 8;
        out += alphabet[(v >> 18) & 63];
        out += alphabet[(v >> 12) & 63];
        out += rest == 2 ? alphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

// A user:password pair (no control characters: it goes into a header field), as Basic credentials.
std::optional<std::string> basic_authorization(std::string_view user_password) {
    if (user_password.find(':') == std::string_view::npos) return std::nullopt;
    for (char c : user_password)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
    return "Basic " + base64(user_password);
}

// http://[user:password@]host:port[/]: the error text, or nothing (p filled in).
std::optional<std::string> parse_parent_url(std::string_view url, parent_config& p) {
    constexpr std::string_view scheme = "http://";
    if (!url.starts_with(scheme)) return "expected http://[user:password@]host:port";
    std::string_view authority = url.substr(scheme.size());
    if (authority.ends_with('/')) authority.remove_suffix(1);
    if (authority.find_first_of("/?#") != std::string_view::npos) return "a parent URL has no path";
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const auto user_password = percent_decoded(authority.substr(0, at));
        if (!user_password) return "bad percent-encoding in the credentials";
        const auto credentials = basic_authorization(*user_password);
        if (!credentials) return "credentials must be user:password";
        p.authorization = *credentials;
        authority = authority.substr(at + 1);
    }
    std::string_view host, port;
    if (authority.starts_with('[')) {
        const auto close = authority.find(']');
        if (close == std::string_view::npos || authority.substr(close + 1, 1) != ":") return "expected [address]:port";
        host = authority.substr(1, close - 1);
        port = authority.substr(close + 2);
        if (!parse_ip(host)) return "'" + std::string(host) + "' is not an IPv6 address";
    } else {
        const auto colon = authority.rfind(':');
        if (colon == std::string_view::npos) return "a parent URL needs a port";
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
        if (!valid_host_name(host)) return "'" + std::string(host) + "' is not a host name or address";
    }
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535)
        return "invalid port '" + std::string(port) + "'";
    p.host = authority.starts_with('[') ? std::string(host) : host_key(host);
    p.port = static_cast<std::uint16_t>(value);
    return std::nullopt;
}

parent_config load_parent(const config_reader& r, const YAML::Node& name, const YAML::Node& body) {
    parent_config p;
    p.name = r.text(name, "parent name");
    const std::string where = "parent " + p.name;
    const bool word = !p.name.empty() && std::all_of(p.name.begin(), p.name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    });
    if (!word || p.name == "direct")  // it goes into Proxy-Status (next-hop) and metric labels as it is
        r.fail(name, "parent name '" + p.name + "' must be letters, digits, '-', '_' or '.', and not 'direct'");
    r.expect_map(body, where);
    r.only_keys(body, where, {"url", "credentials_file", "max_connections", "weight", "retry_after", "fail_after"});
    if (!body["url"]) r.fail(body, where + ": 'url' is required (http://host:port)");
    if (auto error = parse_parent_url(r.text(body["url"], where + ".url"), p)) r.fail(body["url"], where + ".url: " + *error);
    if (const auto f = body["credentials_file"]; f && !f.IsNull()) {
        if (!p.authorization.empty()) r.fail(f, where + ": credentials both in the url and in credentials_file");
        const std::string file = r.private_file(f, where + ".credentials_file");
        std::string_view line = std::string_view(file).substr(0, file.find('\n'));
        if (line.ends_with('\r')) line.remove_suffix(1);
        const auto credentials = basic_authorization(line);
        if (!credentials)
            r.fail(f, where + ".credentials_file: " + r.text(f, "") + " must hold user:password on its first line");
        p.authorization = *credentials;
    }
    if (body["max_connections"]) p.max_connections = r.count(body["max_connections"], where + ".max_connections", 1);
    if (body["weight"]) p.weight = r.count(body["weight"], where + ".weight", 1);
    if (body["fail_after"]) p.fail_after = static_cast<unsigned>(r.count(body["fail_after"], where + ".fail_after", 1));
    if (body["retry_after"]) {
        p.retry_after = r.duration(body["retry_after"], where + ".retry_after");
        if (p.retry_after < 100ms) r.fail(body["retry_after"], where + ".retry_after must be at least 100ms");
    }
    return p;
}

parent_route load_route(const config_reader& r, const YAML::Node& n, const std::vector<parent_config>& parents) {
    parent_route route;
    route.line = n.Mark().line + 1;
    r.expect_map(n, "a route");
    r.only_keys(n, "a route", {"match", "via", "pick"});
    const auto match = n["match"];
    if (!match || !match.IsSequence() || match.size() == 0) r.fail(n, "a route needs 'match': a list of names or networks");
    for (const auto& m : match) {
        const std::string entry = r.text(m, "routes.match");
        if (entry.find('/') != std::string::npos || parse_ip(entry)) {
            const auto network = parse_network(entry);
            if (!network) r.fail(m, "routes.match: '" + entry + "' is not a network");
            route.networks.push_back(*network);
            continue;
        }
        const bool wildcard = entry.starts_with("*.");
        const std::string_view bare = std::string_view(entry).substr(wildcard ? 2 : 0);
        if (!valid_host_name(bare)) r.fail(m, "routes.match: '" + entry + "' is not a host name, *.suffix or network");
        route.names.push_back((wildcard ? "*." : "") + host_key(bare));
    }
    const auto via = n["via"];
    if (!via || !via.IsSequence() || via.size() == 0) r.fail(n, "a route needs 'via': parent names, or [direct]");
    for (const auto& v : via) {
        const std::string name = r.text(v, "routes.via");
        if (name == "direct") {
            route.via.push_back(parent_route::direct);
            continue;
        }
        std::size_t i = 0;
        while (i < parents.size() && parents[i].name != name) ++i;
        if (i == parents.size()) r.fail(v, "routes.via: no parent named '" + name + "' under parents");
        route.via.push_back(i);
    }
    if (n["pick"]) {
        const std::string pick = r.text(n["pick"], "routes.pick");
        if (pick == "least_busy") route.pick = parent_route::pick_kind::least_busy;
        else if (pick == "by_host") route.pick = parent_route::pick_kind::by_host;
        else if (pick != "round_robin") r.fail(n["pick"], "routes.pick: '" + pick + "' is not round_robin, least_busy or by_host");
    }
    return route;
}

}  // namespace

void load_parents(const config_reader& r, const YAML::Node& parents, const YAML::Node& routes, config& c) {
    if (parents && !parents.IsNull()) {
        r.expect_map(parents, "parents");
        for (const auto& kv : parents) {
            parent_config p = load_parent(r, kv.first, kv.second);
            for (const auto& seen : c.parents)
                if (seen.name == p.name) r.fail(kv.first, "parent " + p.name + " is listed twice");
            c.parents.push_back(std::move(p));
        }
    }
    if (routes && !routes.IsNull()) {
        if (!routes.IsSequence()) r.fail(routes, "routes must be a list");
        for (const auto& n : routes) c.routes.push_back(load_route(r, n, c.parents));
    }
}

}  // namespace politeproxy::config_detail
