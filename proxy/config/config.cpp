#include "politeproxy/config/config.hpp"

#include "politeproxy/base/duration.hpp"
#include "politeproxy/policy/host_key.hpp"

#include <algorithm>
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

std::string listen_address::text() const {
    return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                                : host + ":" + std::to_string(port);
}

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

bool config::connect_port_allowed(std::uint16_t port) const {
    const auto& ports = security.connect_ports;
    return std::find(ports.begin(), ports.end(), port) != ports.end();
}

const char* name_of(upstream_protocol p) {
    switch (p) {
    case upstream_protocol::automatic: return "auto";
    case upstream_protocol::http1: return "http1";
    case upstream_protocol::h2c: return "h2c";
    }
    return "auto";
}

std::chrono::sys_days utc_today() {
    return std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now());
}

std::string describe(const config& c, std::chrono::sys_days today) {
    std::ostringstream out;
    auto row = [&out](std::string_view host, const host_policy& p, std::string_view note) {
        out << host << "\tconcurrency=" << p.concurrency << "\trate=" << p.rate
            << "\tburst=" << p.burst << "\tmax_waiting=" << p.queue.max_waiting
            << "\tmax_wait=" << format_duration(p.queue.max_wait)
            << "\thard_max=" << p.adaptive.hard_max << "\tenforce=" << (p.enforce ? "true" : "false")
            << "\tupstream_protocol=" << name_of(p.upstream) << "\t" << note << "\n";
    };
    out << "# effective per-host limits from " << c.source << "\n";
    out << "# host\tlimits\tnote\n";
    row("(defaults)", c.defaults, "");
    for (const auto& o : c.hosts) {
        std::string note = o.reason.empty() ? "" : "reason=\"" + o.reason + "\"";
        if (o.expired(today)) note += (note.empty() ? "" : " ") + std::string("EXPIRED: ignored");
        row(o.pattern, o.expired(today) ? c.defaults : o.policy, note);
    }
    return out.str();
}

}  // namespace politeproxy
