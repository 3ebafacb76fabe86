#include "politeproxy/admin/hosts_view.hpp"

#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/policy/wall_time.hpp"

#include <algorithm>
#include <cstdio>

namespace politeproxy {

void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", u);
            out += esc;
        } else {
            out += c;
        }
    }
    out += '"';
}

namespace {

void append_number(std::string& out, double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out += buf;
}

// `, "name": seconds` or `, "name": null`.
void append_seconds(std::string& out, const char* name, std::optional<clock::duration> d) {
    out += ", \"";
    out += name;
    out += "\": ";
    if (d) append_number(out, std::chrono::duration<double>(*d).count());
    else out += "null";
}

// The DNS cache's addresses of a host's key, and how long they hold.
void append_addresses(std::string& out, const dns_resolver::cached& c) {
    using kind = dns_cache::hit::kind;
    if (c.addresses.empty() || c.what == kind::miss) {
        out += ", \"addresses\": null, \"addresses_ttl_seconds\": null";
        return;
    }
    out += ", \"addresses\": [";
    for (std::size_t i = 0; i < c.addresses.size(); ++i) {
        if (i) out += ", ";
        append_json_string(out, address_text(c.addresses[i]));
    }
    out += "], \"addresses_ttl_seconds\": ";
    append_number(out, std::chrono::duration<double>(c.expires - clock::now()).count());
}

}  // namespace

void append_host_json(std::string& out, const host_snapshot& h, const parent_set& parents,
                      std::chrono::system_clock::time_point wall_now, const dns_resolver* names) {
    out += "{\"key\": ";
    append_json_string(out, h.key);
    out += ", \"limit\": " + std::to_string(h.limit);
    out += ", \"configured_limit\": " + std::to_string(h.configured_limit);
    out += ", \"stream_ceiling\": " + (h.stream_ceiling ? std::to_string(*h.stream_ceiling) : std::string("null"));
    out += h.h2 ? ", \"upstream_protocol\": \"h2\"" : ", \"upstream_protocol\": \"http/1.1\"";
    out += ", \"in_flight\": " + std::to_string(h.in_flight);
    out += ", \"fleet_in_flight\": " + (h.fleet_in_flight ? std::to_string(*h.fleet_in_flight) : std::string("null"));
    out += ", \"fleet_store_up\": " + (h.fleet_store_up ? std::string(*h.fleet_store_up ? "true" : "false") : std::string("null"));
    out += ", \"waiting\": " + std::to_string(h.waiting);
    out += ", \"rate\": ";
    append_number(out, h.rate);
    out += ", \"configured_rate\": ";
    append_number(out, h.configured_rate);
    out += ", \"rate_source\": \"";
    out += name_of(h.rate_from);
    out += '"';
    out += ", \"paused_until\": ";
    if (h.paused_for > clock::duration::zero()) {
        // Rounded up: never before the pause ends.
        const auto until = wall_now + std::chrono::duration_cast<std::chrono::system_clock::duration>(h.paused_for);
        out += '"' + format_timestamp(std::chrono::ceil<std::chrono::milliseconds>(until)) + '"';
    } else {
        out += "null";
    }
    out += ", \"paused_seconds\": ";
    append_number(out, std::chrono::duration<double>(h.paused_for).count());
    out += ", \"override_reason\": ";
    if (h.override_reason.empty()) out += "null";
    else append_json_string(out, h.override_reason);
    out += ", \"override_source\": ";
    if (h.override_source.empty()) out += "null";
    else append_json_string(out, h.override_source);
    out += ", \"override\": ";
    out += h.api_override ? to_json(*h.api_override) : std::string("null");
    append_seconds(out, "p95_seconds", h.p95);
    append_seconds(out, "baseline_seconds", h.baseline);
    append_seconds(out, "latency_at_limit_seconds", h.epoch_latency);
    out += ", \"last_change\": ";
    if (h.last_reason == change_reason::none) {
        out += "null";
    } else {
        out += "{\"reason\": \"";
        out += name_of(h.last_reason);
        out += "\", \"seconds_ago\": ";
        append_number(out, std::chrono::duration<double>(h.since_last_change).count());
        out += "}";
    }
    out += ", \"domain_group\": ";
    if (h.domain_group) {
        out += "{\"key\": ";
        append_json_string(out, h.domain_group->key);
        out += ", \"in_flight\": " + std::to_string(h.domain_group->in_flight) +
               ", \"waiting\": " + std::to_string(h.domain_group->waiting) +
               ", \"limit\": " + std::to_string(h.domain_group->limit) + "}";
    } else {
        out += "null";
    }
    out += ", \"clients\": [";
    for (std::size_t i = 0; i < h.clients.size(); ++i) {
        const auto& c = h.clients[i];
        out += i ? ", {\"client\": " : "{\"client\": ";
        if (c.client.empty()) out += "null";
        else append_json_string(out, c.client);
        out += ", \"waiting\": " + std::to_string(c.waiting) + ", \"weight\": " + std::to_string(c.weight) +
               (c.at_cap ? ", \"at_cap\": true}" : ", \"at_cap\": false}");
    }
    out += "]";
    out += std::string(", \"enforce\": ") + (h.enforce ? "true" : "false");
    out += ", \"via\": [";
    bool first = true;
    for (const std::string& name : parents.route_names(h.key)) {
        if (!std::exchange(first, false)) out += ", ";
        append_json_string(out, name);
    }
    out += "]";
    if (names) append_addresses(out, names->peek(h.key));
    out += "}";
}

std::string render_clients_json(const host_gates& gates) {
    auto clients = gates.clients().snapshot();
    std::sort(clients.begin(), clients.end(), [](const client_snapshot& a, const client_snapshot& b) {
        return a.in_flight + a.waiting != b.in_flight + b.waiting ? a.in_flight + a.waiting > b.in_flight + b.waiting
                                                                  : a.key < b.key;
    });
    const std::size_t shown = std::min(clients.size(), max_clients_listed);
    std::string out = "{\"clients\": [";
    for (std::size_t i = 0; i < shown; ++i) {
        const auto& c = clients[i];
        out += i ? ",\n  {\"client\": " : "\n  {\"client\": ";
        append_json_string(out, c.key);
        out += ", \"weight\": " + std::to_string(c.weight) + ", \"waiting\": " + std::to_string(c.waiting) +
               ", \"in_flight\": " + std::to_string(c.in_flight) + ", \"requests\": {";
        for (std::size_t o = 0; o < outcome_count; ++o) {
            out += o ? ", \"" : "\"";
            out += outcome_name(static_cast<outcome>(o));
            out += "\": " + std::to_string(c.outcomes[o]);
        }
        out += "}}";
    }
    out += shown == 0 ? "]" : "\n]";
    out += ", \"more\": " + std::to_string(clients.size() - shown) + "}\n";
    return out;
}

std::string render_hosts_json(const host_gates& gates, const parent_set& parents, clock::time_point now,
                              std::chrono::system_clock::time_point wall_now, const dns_resolver* names) {
    auto hosts = gates.snapshot(now);
    std::sort(hosts.begin(), hosts.end(), [](const host_snapshot& a, const host_snapshot& b) {
        return a.in_flight + a.waiting != b.in_flight + b.waiting ? a.in_flight + a.waiting > b.in_flight + b.waiting
                                                                  : a.key < b.key;
    });
    std::string out = "[";
    for (const auto& h : hosts) {
        out += out.size() > 1 ? ",\n  " : "\n  ";
        append_host_json(out, h, parents, wall_now, names);
    }
    out += hosts.empty() ? "]\n" : "\n]\n";
    return out;
}

}  // namespace politeproxy
