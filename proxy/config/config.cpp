#include "politeproxy/config/config.hpp"

#include "politeproxy/base/duration.hpp"
#include "politeproxy/policy/admin_tokens.hpp"
#include "politeproxy/policy/host_key.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace politeproxy {
namespace {

// Exact names beat every wildcard; among wildcards the longest suffix wins.
std::size_t specificity(std::string_view pattern) {
    return pattern.starts_with("*.") ? pattern.size() : std::string_view::npos;
}

template <class Entry>
const Entry* best_match(const std::vector<Entry>& entries, std::string_view key,
                        auto&& usable) {
    const Entry* best = nullptr;
    for (const auto& e : entries) {
        if (!usable(e) || !host_matches(e.pattern, key)) continue;
        if (!best || specificity(e.pattern) > specificity(best->pattern)) best = &e;
    }
    return best;
}

}  // namespace

std::vector<ip_network> default_allow_clients() {
    std::vector<ip_network> out;
    for (auto n : {"127.0.0.0/8", "::1/128"}) address_filter::expand(n, out);
    return out;
}

address_filter default_destinations() {
    address_filter f;
    for (auto n : {"private", "loopback", "link_local"}) address_filter::expand(n, f.deny);
    return f;
}

std::string listen_address::text() const { return authority_of(host, port); }

std::string parent_config::authority() const { return authority_of(host, port); }

const host_override* config::override_for(std::string_view key, std::chrono::sys_days today) const {
    return best_match(hosts, key, [today](const host_override& o) { return !o.expired(today); });
}

const host_policy& config::policy_for(std::string_view key, std::chrono::sys_days today) const {
    const host_override* o = override_for(key, today);
    return o ? o->policy : defaults;
}

const resolve_entry* config::static_entry(std::string_view host) const {
    return best_match(resolve, host, [](const resolve_entry&) { return true; });
}

std::optional<std::string_view> config::static_address(std::string_view host) const {
    const resolve_entry* e = static_entry(host);
    if (!e) return std::nullopt;
    return std::string_view(e->address);
}

bool tls_config::intercepts(std::string_view host) const {
    if (mode != mode_type::intercept) return false;
    return std::none_of(intercept_exclude.begin(), intercept_exclude.end(),
                        [&](const std::string& pattern) { return host_matches(pattern, host); });
}

std::optional<std::string> open_proxy_error(const config& c) {
    if (c.security.users) return std::nullopt;
    const auto address = parse_ip(c.listen.host);
    const ip_network loopback4 = *parse_network("127.0.0.0/8");
    const ip_network loopback6 = *parse_network("::1/128");
    if (address && (loopback4.contains(*address) || loopback6.contains(*address))) return std::nullopt;
    for (const auto& n : c.security.allow_clients) {
        const bool inside = (loopback4.contains(n.base) && n.prefix >= loopback4.prefix) ||
                            (loopback6.contains(n.base) && n.prefix >= loopback6.prefix);
        if (!inside)
            return "listen " + c.listen.host + " is not loopback and security.allow_clients admits more than loopback, "
                   "with no security.users_file: that is an open proxy. Set security.users_file (htpasswd, bcrypt), "
                   "or narrow allow_clients or listen";
    }
    return std::nullopt;
}

bool config::connect_port_allowed(std::uint16_t port) const {
    const auto& ports = security.connect_ports;
    return std::find(ports.begin(), ports.end(), port) != ports.end();
}

std::chrono::sys_days utc_today() {
    return std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now());
}

std::string describe(const config& c, std::chrono::sys_days today) {
    std::ostringstream out;
    auto route_of = [&c](std::string_view host) {
        const parent_route* r = route_for(c.routes, host, {});
        if (!r) return std::string("direct");
        std::string names;
        for (std::size_t i : r->via)
            names += (names.empty() ? "" : ",") + (i == parent_route::direct ? "direct" : c.parents[i].name);
        return names;
    };
    auto row = [&out, &route_of](std::string_view host, const host_policy& p, std::string_view note) {
        out << host << "\tvia=" << route_of(host) << "\tconcurrency=" << p.concurrency << "\trate=" << p.rate
            << "\tburst=" << p.burst << "\tmax_waiting=" << p.queue.max_waiting
            << "\tmax_wait=" << format_duration(p.queue.max_wait)
            << "\thard_max=" << p.adaptive.hard_max << "\tenforce=" << (p.enforce ? "true" : "false")
            << "\tupstream_protocol=" << name_of(p.upstream) << "\t" << note << "\n";
    };
    out << "# effective per-host limits from " << c.source << "\n";
    out << "# host\tlimits\tnote\n";
    if (c.fleet)
        out << "# fleet: " << c.fleet->redis << " lease_ttl=" << format_duration(c.fleet->lease_ttl)
            << " expected_workers=" << c.fleet->expected_workers << " on_store_failure="
            << (c.fleet->on_store_failure == fleet_config::failure_mode::fail_closed ? "fail_closed" : "local_share")
            << " timeout=" << format_duration(c.fleet->timeout) << "\n";
    // The number of tokens, never a token or its digest.
    if (c.admin.tokens)
        out << "# admin: token_file " << c.admin.token_file << " (" << c.admin.tokens->size() << " tokens)\n";
    if (!c.admin.state_file.empty()) out << "# admin: state_file " << c.admin.state_file << "\n";
    if (c.clients) {
        constexpr const char* ways[] = {"user", "address", "header:"};
        out << "# clients: identify_by=" << ways[static_cast<int>(c.clients->identify_by)] << c.clients->header
            << " share=" << (c.clients->fair ? "fair" : "fifo") << " max_waiting=" << c.clients->max_waiting
            << " max_in_flight=" << c.clients->max_in_flight << " weights=";
        if (c.clients->weights.empty()) out << "{}";
        for (std::size_t i = 0; i < c.clients->weights.size(); ++i)
            out << (i ? "," : "") << c.clients->weights[i].first << ":" << c.clients->weights[i].second;
        out << "\n";
    }
    for (const auto& p : c.parents)
        out << "# parent " << p.name << ": http://" << p.authority() << (p.authorization.empty() ? "" : " (with credentials)")
            << " max_connections=" << p.max_connections << " weight=" << p.weight
            << " retry_after=" << format_duration(p.retry_after) << " fail_after=" << p.fail_after << "\n";
    constexpr const char* picks[] = {"round_robin", "least_busy", "by_host"};
    for (const auto& r : c.routes) {
        out << "# route (line " << r.line << "):";
        for (const auto& n : r.names) out << " " << n;
        for (const auto& n : r.networks) out << " " << network_text(n);
        out << " -> via";
        for (std::size_t i : r.via) out << " " << (i == parent_route::direct ? "direct" : c.parents[i].name);
        out << " pick=" << picks[static_cast<int>(r.pick)] << "\n";
    }
    row("(defaults)", c.defaults, "");
    for (const auto& o : c.hosts) {
        std::string note = o.reason.empty() ? "" : "reason=\"" + o.reason + "\"";
        if (o.expired(today)) note += (note.empty() ? "" : " ") + std::string("EXPIRED: ignored");
        row(o.pattern, o.expired(today) ? c.defaults : o.policy, note);
    }
    return out.str();
}

namespace {

// host[:port] or [v6]:port, the port 6379 when left out.
std::optional<std::string> parse_endpoint(std::string_view authority, fleet_config::endpoint& out) {
    std::string_view host = authority, port;
    if (authority.starts_with('[')) {
        const auto close = authority.find(']');
        if (close == std::string_view::npos) return "unbalanced [ in the host";
        host = authority.substr(1, close - 1);
        const std::string_view after = authority.substr(close + 1);
        if (!after.empty() && !after.starts_with(':')) return "expected :port after the host";
        port = after.empty() ? after : after.substr(1);
    } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
    }
    if (host.empty()) return "no host";
    out.host = std::string(host);
    out.port = 6379;
    if (!port.empty()) {
        unsigned value = 0;
        const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535)
            return "invalid port '" + std::string(port) + "'";
        out.port = static_cast<std::uint16_t>(value);
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::string> parse_redis_url(std::string_view url, fleet_config& out) {
    using topology = fleet_config::topology;
    constexpr std::pair<std::string_view, topology> schemes[] = {
        {"redis://", topology::single}, {"redis+cluster://", topology::cluster}, {"redis+sentinel://", topology::sentinel}};
    std::string_view rest;
    for (const auto& [scheme, kind] : schemes)
        if (url.starts_with(scheme)) {
            out.kind = kind;
            rest = url.substr(scheme.size());
            break;
        }
    if (rest.data() == nullptr)
        return "expected redis://host:port/db, redis+cluster://h1:p1,h2:p2 or redis+sentinel://s1:p1,s2:p2/MASTER "
               "(rediss:// and unix sockets are not supported)";
    std::string_view authority = rest.substr(0, rest.find('/'));
    std::string_view path = rest.substr(authority.size());
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        std::string_view user_info = authority.substr(0, at);
        authority = authority.substr(at + 1);
        const auto colon = user_info.find(':');
        if (colon == std::string_view::npos || colon != 0) return "only a password is supported: redis://:password@host";
        out.password = std::string(user_info.substr(1));
    }
    out.nodes.clear();
    for (std::size_t begin = 0; begin <= authority.size();) {
        const auto comma = std::min(authority.find(',', begin), authority.size());
        fleet_config::endpoint e;
        if (auto error = parse_endpoint(authority.substr(begin, comma - begin), e)) return error;
        out.nodes.push_back(std::move(e));
        begin = comma + 1;
    }
    constexpr std::size_t most_nodes = 64;
    if (out.nodes.size() > most_nodes) return "more than 64 nodes";
    if (out.kind == topology::single && out.nodes.size() > 1)
        return "one node only in redis://; a cluster is redis+cluster://h1:p1,h2:p2";
    const std::string_view tail = path.size() > 1 ? path.substr(1) : std::string_view{};
    if (out.kind == topology::sentinel) {
        // /MASTER or /MASTER/db
        const std::string_view name = tail.substr(0, tail.find('/'));
        if (name.empty()) return "redis+sentinel:// needs the master's name: redis+sentinel://s1:p1,s2:p2/MASTER";
        out.master_name = std::string(name);
        const std::string_view db = name.size() < tail.size() ? tail.substr(name.size() + 1) : std::string_view{};
        if (!db.empty()) {
            const auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), out.db);
            if (ec != std::errc{} || end != db.data() + db.size()) return "invalid database number '" + std::string(db) + "'";
        }
        return std::nullopt;
    }
    if (!tail.empty()) {
        if (out.kind == topology::cluster && tail != "0") return "a cluster has only database 0";
        const auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), out.db);
        if (ec != std::errc{} || end != tail.data() + tail.size()) return "invalid database number '" + std::string(tail) + "'";
    }
    return std::nullopt;
}

}  // namespace politeproxy
