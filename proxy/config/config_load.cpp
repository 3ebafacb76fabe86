#include "config_reader.hpp"

#include "politeproxy/policy/admin_tokens.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/policy/proxy_users.hpp"
#include "politeproxy/policy/public_suffixes.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace politeproxy {
namespace {

using config_detail::load_error;

class reader : public config_detail::config_reader {
public:
    using config_reader::config_reader;

    void policy(const YAML::Node& map, host_policy& p, std::string_view where) const {
        for (const auto& kv : map) {
            const auto key = kv.first.as<std::string>();
            const YAML::Node& v = kv.second;
            if (key == "concurrency") p.concurrency = count(v, "concurrency", 1);
            else if (key == "rate") p.rate = positive(v, "rate");
            else if (key == "burst") {
                p.burst = positive(v, "burst");
                if (p.burst < 1) fail(v, "burst must be at least 1");
            } else if (key == "queue") {
                expect_map(v, "queue");
                only_keys(v, "queue", {"max_waiting", "max_wait"});
                if (v["max_waiting"]) p.queue.max_waiting = count(v["max_waiting"], "queue.max_waiting", 1);
                if (v["max_wait"]) p.queue.max_wait = duration(v["max_wait"], "queue.max_wait");
            } else if (key == "adaptive") {
                expect_map(v, "adaptive");
                only_keys(v, "adaptive", {"enabled", "hard_max", "grow_interval"});
                if (v["enabled"]) p.adaptive.enabled = boolean(v["enabled"], "adaptive.enabled");
                if (v["hard_max"]) p.adaptive.hard_max = count(v["hard_max"], "adaptive.hard_max", 1);
                if (v["grow_interval"]) p.adaptive.grow_interval = duration(v["grow_interval"], "adaptive.grow_interval");
            } else if (key == "backoff") {
                expect_map(v, "backoff");
                only_keys(v, "backoff", {"initial", "max", "forgive_after", "jitter"});
                if (v["initial"]) p.backoff.initial = duration(v["initial"], "backoff.initial");
                if (v["max"]) p.backoff.max = duration(v["max"], "backoff.max");
                if (v["forgive_after"]) p.backoff.forgive_after = duration(v["forgive_after"], "backoff.forgive_after");
                if (v["jitter"]) {
                    p.backoff.jitter = number(v["jitter"], "backoff.jitter");
                    if (p.backoff.jitter < 0 || p.backoff.jitter > 1) fail(v["jitter"], "backoff.jitter must be within 0..1");
                }
            } else if (key == "throttle") {
                p.throttle = throttle(v, p.throttle);
            } else if (key == "retry_after_cap") p.retry_after_cap = duration(v, "retry_after_cap");
            else if (key == "enforce") p.enforce = boolean(v, "enforce");
            else if (key == "upstream_protocol") {
                const std::string name = text(v, "upstream_protocol");
                if (name == "auto") p.upstream = upstream_protocol::automatic;
                else if (name == "http1") p.upstream = upstream_protocol::http1;
                else if (name == "h2c") p.upstream = upstream_protocol::h2c;
                else fail(v, "upstream_protocol must be auto, http1 or h2c, got '" + name + "'");
            }
            else if (key == "timeouts") {
                expect_map(v, "timeouts");
                only_keys(v, "timeouts", {"connect", "response_headers", "idle"});
                if (v["connect"]) p.timeouts.connect = duration(v["connect"], "timeouts.connect");
                if (v["response_headers"]) p.timeouts.response_headers = duration(v["response_headers"], "timeouts.response_headers");
                if (v["idle"]) p.timeouts.idle = duration(v["idle"], "timeouts.idle");
            } else if (key != "key" && key != "reason" && key != "expires") {
                fail(kv.first, "unknown key '" + key + "' in " + std::string(where));
            }
        }
        if (p.backoff.initial > p.backoff.max) fail(map, std::string(where) + ": backoff.initial exceeds backoff.max");
    }

    // throttle: {statuses: [...], headers: {name: regex}}; a key left out keeps `base`'s.
    throttle_signals throttle(const YAML::Node& v, const throttle_signals& base) const {
        expect_map(v, "throttle");
        only_keys(v, "throttle", {"statuses", "headers"});
        std::vector<unsigned> statuses = base.statuses();
        if (const auto list = v["statuses"]) {
            if (!list.IsSequence()) fail(list, "throttle.statuses must be a list of status codes");
            statuses.clear();
            for (const auto& item : list) {
                const std::size_t status = count(item, "throttle.statuses", 100);
                if (status > 599) fail(item, "throttle.statuses: " + std::to_string(status) + " is not a status code");
                statuses.push_back(static_cast<unsigned>(status));
            }
        }
        std::vector<throttle_signals::header_rule> headers = base.headers();
        if (const auto map = v["headers"]) {
            if (!map.IsNull()) expect_map(map, "throttle.headers");
            headers.clear();
            for (const auto& kv : map) {
                const std::string name = text(kv.first, "throttle.headers");
                if (name.empty() || name.find_first_of(" \t:") != std::string::npos)
                    fail(kv.first, "throttle.headers: '" + name + "' is not a field name");
                throttle_signals::header_rule rule;
                if (auto bad = throttle_signals::make_rule(name, text(kv.second, "throttle.headers." + name), rule))
                    fail(kv.second, "throttle.headers." + name + ": " + *bad);
                headers.push_back(std::move(rule));
            }
        }
        return throttle_signals(std::move(statuses), std::move(headers));
    }

    std::chrono::sys_days date(const YAML::Node& n) const {
        const std::string s = text(n, "expires");
        int y = 0;
        unsigned m = 0, d = 0;
        char tail = 0;
        if (std::sscanf(s.c_str(), "%4d-%2u-%2u%c", &y, &m, &d, &tail) != 3)
            fail(n, "expires must be a date YYYY-MM-DD, got '" + s + "'");
        const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{m},
                                              std::chrono::day{d}};
        if (!ymd.ok()) fail(n, "expires is not a valid date: '" + s + "'");
        return std::chrono::sys_days{ymd};
    }

    host_override entry(const YAML::Node& name, const YAML::Node& body, const host_policy& defaults) const {
        host_override o;
        const std::string raw = text(name, "host name");
        o.pattern = raw.starts_with("*.") ? "*." + host_key(raw.substr(2)) : host_key(raw);
        o.line = name.Mark().line + 1;
        const std::string where = "host " + o.pattern;
        if (o.pattern.empty() || o.pattern == "*.") fail(name, "empty host name in hosts");
        if (!body.IsMap()) fail(body, where + " must be a mapping");
        if (body["key"]) fail(body["key"], where + ": 'key' is only valid under defaults");
        o.policy = defaults;
        policy(body, o.policy, where);
        if (body["reason"]) o.reason = text(body["reason"], "reason");
        if (body["expires"]) o.expires = date(body["expires"]);

        const auto& p = o.policy;
        const char* raised = p.concurrency > defaults.concurrency     ? "concurrency"
                             : p.rate > defaults.rate                 ? "rate"
                             : p.burst > defaults.burst               ? "burst"
                             : p.adaptive.hard_max > defaults.adaptive.hard_max ? "adaptive.hard_max"
                                                                                  : nullptr;
        bool blank = true;
        for (char c : o.reason) blank = blank && std::isspace(static_cast<unsigned char>(c));
        if (raised && blank)
            fail(name, "host " + o.pattern + " raises " + raised +
                           " above defaults without a reason: add a non-empty 'reason'");
        return o;
    }

    config load(const YAML::Node& root) const {
        config c;
        c.source = source();
        if (root.IsNull()) return c;
        expect_map(root, "the configuration");
        only_keys(root, "the top level", {"listen", "admin_listen", "workers", "drain_timeout", "defaults",
                                          "groups", "hosts", "fleet", "robots", "resolve", "metrics", "limits",
                                          "security", "admin", "tls", "parents", "routes", "clients", "dns"});
        if (root["listen"]) c.listen = address(root["listen"], "listen");
        if (root["admin_listen"]) c.admin_listen = address(root["admin_listen"], "admin_listen");
        if (root["workers"]) c.workers = static_cast<unsigned>(count(root["workers"], "workers", 0));
        if (root["drain_timeout"]) c.drain_timeout = duration(root["drain_timeout"], "drain_timeout");

        if (const auto d = root["defaults"]; d && !d.IsNull()) {
            expect_map(d, "defaults");
            policy(d, c.defaults, "defaults");
            for (const char* only_for_hosts : {"reason", "expires"})
                if (d[only_for_hosts]) fail(d[only_for_hosts], std::string("defaults: '") + only_for_hosts + "' is only valid under hosts");
            if (d["key"]) {
                const std::string kind = text(d["key"], "defaults.key");
                if (kind == "domain") c.key = config::key_kind::domain;
                else if (kind == "ip") c.key = config::key_kind::ip;
                else if (kind != "host") fail(d["key"], "defaults.key: '" + kind + "' is not host, domain or ip");
            }
        }
        if (const auto n = root["groups"]; n && !n.IsNull()) {
            expect_map(n, "groups");
            only_keys(n, "groups", {"domain", "ip"});
            for (auto [name, cap] : {std::pair{"domain", &c.groups.domain}, std::pair{"ip", &c.groups.ip}}) {
                const auto g = n[name];
                if (!g || g.IsNull()) continue;
                const std::string where = std::string("groups.") + name;
                expect_map(g, where);
                only_keys(g, where, {"concurrency"});
                if (!g["concurrency"]) fail(g, where + ": 'concurrency' is required");
                *cap = count(g["concurrency"], where + ".concurrency", 1);
            }
            // A domain group is found from the host name; an ip group under key: ip is the gate itself.
            if (c.groups.domain && c.key != config::key_kind::host)
                fail(n["domain"], "groups.domain needs defaults.key: host (with key: domain the gate is the domain already)");
            if (c.groups.ip && c.key == config::key_kind::ip)
                fail(n["ip"], "groups.ip with defaults.key: ip is the gate itself: use defaults.concurrency");
        }
        fleet(root["fleet"], c);
        robots(root["robots"], c.robots);
        dns(root["dns"], c.dns);

        if (const auto h = root["hosts"]; h && !h.IsNull()) {
            expect_map(h, "hosts");
            for (const auto& kv : h) {
                host_override o = entry(kv.first, kv.second, c.defaults);
                for (const auto& seen : c.hosts)
                    if (seen.pattern == o.pattern) fail(kv.first, "host " + o.pattern + " is listed twice");
                c.hosts.push_back(std::move(o));
            }
        }
        if (const auto r = root["resolve"]; r && !r.IsNull()) {
            expect_map(r, "resolve");
            for (const auto& kv : r) {
                const std::string name = text(kv.first, "resolve name");
                const std::string addr = text(kv.second, "resolve address");
                const auto bytes = parse_ip(addr);
                if (!bytes) fail(kv.second, "resolve " + name + ": '" + addr + "' is not an IP address");
                c.resolve.push_back({name.starts_with("*.") ? "*." + host_key(name.substr(2)) : host_key(name), addr, *bytes});
            }
        }
        if (const auto m = root["metrics"]; m && !m.IsNull()) {
            expect_map(m, "metrics");
            only_keys(m, "metrics", {"max_host_series", "max_client_series", "per_user"});
            if (m["per_user"]) c.per_user_metrics = boolean(m["per_user"], "metrics.per_user");
            if (m["max_host_series"]) c.max_host_series = count(m["max_host_series"], "metrics.max_host_series", 1);
            if (m["max_client_series"])
                c.max_client_series = count(m["max_client_series"], "metrics.max_client_series", 1);
        }
        if (const auto l = root["limits"]; l && !l.IsNull()) {
            expect_map(l, "limits");
            only_keys(l, "limits", {"request_line_bytes", "request_header_bytes", "request_header_fields",
                                    "response_header_bytes", "h2_max_concurrent_streams", "host_idle_ttl",
                                    "max_parked", "max_client_connections"});
            if (l["request_line_bytes"]) c.limits.request_line_bytes = count(l["request_line_bytes"], "limits.request_line_bytes", 256);
            if (l["request_header_fields"]) c.limits.request_header_fields = count(l["request_header_fields"], "limits.request_header_fields", 8);
            if (l["request_header_bytes"]) c.limits.request_header_bytes = count(l["request_header_bytes"], "limits.request_header_bytes", 1024);
            if (l["response_header_bytes"]) c.limits.response_header_bytes = count(l["response_header_bytes"], "limits.response_header_bytes", 1024);
            if (l["h2_max_concurrent_streams"])
                c.limits.h2_max_concurrent_streams =
                    count(l["h2_max_concurrent_streams"], "limits.h2_max_concurrent_streams", 1);
            if (l["host_idle_ttl"]) c.limits.host_idle_ttl = duration(l["host_idle_ttl"], "limits.host_idle_ttl");
            if (l["max_parked"]) c.limits.max_parked = count(l["max_parked"], "limits.max_parked", 1);
            if (l["max_client_connections"])
                c.limits.max_client_connections = count(l["max_client_connections"], "limits.max_client_connections", 1);
        }
        security(root["security"], c);
        admin(root["admin"], c.admin);
        tls(root["tls"], c);
        config_detail::load_parents(*this, root["parents"], root["routes"], c);
        config_detail::load_clients(*this, root["clients"], c);
        if (c.per_user_metrics && !c.security.users)
            fail(root["metrics"]["per_user"], "metrics.per_user needs security.users_file (users to count)");
        if (c.key == config::key_kind::domain || c.groups.domain) {
            try {
                c.suffixes = std::make_shared<const public_suffixes>();
            } catch (const std::exception& e) {
                fail(c.groups.domain ? root["groups"]["domain"] : root["defaults"]["key"],
                     std::string("the Public Suffix List (for registrable domains) cannot be loaded: ") + e.what());
            }
        }
        return c;
    }

    void robots(const YAML::Node& n, robots_config& r) const {
        if (!n || n.IsNull()) return;
        expect_map(n, "robots");
        only_keys(n, "robots", {"crawl_delay", "disallow", "user_agent", "max_delay", "cache_ttl"});
        if (n["crawl_delay"]) {
            const std::string mode = text(n["crawl_delay"], "robots.crawl_delay");
            if (mode != "off" && mode != "honor") fail(n["crawl_delay"], "robots.crawl_delay: '" + mode + "' is not off or honor");
            r.honor = mode == "honor";
        }
        if (n["disallow"]) {
            const std::string mode = text(n["disallow"], "robots.disallow");
            if (mode != "off" && mode != "enforce") fail(n["disallow"], "robots.disallow: '" + mode + "' is not off or enforce");
            r.enforce = mode == "enforce";
        }
        if (n["user_agent"]) {
            const std::string agent = text(n["user_agent"], "robots.user_agent");
            const bool token = !agent.empty() && agent.size() <= 64 &&
                               std::all_of(agent.begin(), agent.end(), [](char ch) {
                                   return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_';
                               });
            if (!token)
                fail(n["user_agent"], "robots.user_agent: '" + agent +
                                          "' is not from_request or a product token (letters, digits, '-', '_')");
            if (agent != "from_request") r.user_agent = agent;
        }
        for (auto [name, field] : {std::pair{"max_delay", &r.max_delay}, std::pair{"cache_ttl", &r.cache_ttl}}) {
            if (!n[name]) continue;
            *field = duration(n[name], std::string("robots.") + name);
            if (*field <= clock::duration::zero()) fail(n[name], std::string("robots.") + name + " must be positive");
        }
    }

    void dns(const YAML::Node& n, dns_config& d) const {
        if (!n || n.IsNull()) return;
        expect_map(n, "dns");
        only_keys(n, "dns", {"servers", "min_ttl", "max_ttl", "negative_ttl", "stale_for", "max_names",
                             "connection_attempt_delay"});
        if (const auto servers = n["servers"]; servers && !servers.IsNull()) {
            if (!servers.IsSequence()) fail(servers, "dns.servers must be a list of ADDRESS:PORT");
            for (const auto& s : servers) {
                d.servers.push_back(address(s, "dns.servers"));
                if (d.servers.back().port == 0) fail(s, "dns.servers: port 0 is not a DNS server's port");
            }
        }
        for (auto [name, field] : {std::pair{"min_ttl", &d.min_ttl}, std::pair{"max_ttl", &d.max_ttl},
                                   std::pair{"negative_ttl", &d.negative_ttl}, std::pair{"stale_for", &d.stale_for},
                                   std::pair{"connection_attempt_delay", &d.connection_attempt_delay}})
            if (n[name]) *field = duration(n[name], std::string("dns.") + name);
        if (d.min_ttl > d.max_ttl) fail(n["min_ttl"] ? n["min_ttl"] : n, "dns.min_ttl must not exceed dns.max_ttl");
        if (d.max_ttl <= clock::duration::zero()) fail(n["max_ttl"], "dns.max_ttl must be positive");
        if (d.connection_attempt_delay < 10ms || d.connection_attempt_delay > 2s)
            fail(n["connection_attempt_delay"],
                 "dns.connection_attempt_delay must be between 10ms and 2s (RFC 8305 recommends 250ms)");
        if (n["max_names"]) d.max_names = count(n["max_names"], "dns.max_names", 1);
    }

    void fleet(const YAML::Node& f, config& c) const {
        if (!f || f.IsNull()) return;
        expect_map(f, "fleet");
        only_keys(f, "fleet", {"redis", "lease_ttl", "expected_workers", "on_store_failure", "timeout"});
        fleet_config fc;
        if (!f["redis"]) fail(f, "fleet needs 'redis' (redis://host:port/db)");
        fc.redis = text(f["redis"], "fleet.redis");
        if (auto error = parse_redis_url(fc.redis, fc)) fail(f["redis"], "fleet.redis: " + *error);
        if (f["lease_ttl"]) fc.lease_ttl = duration(f["lease_ttl"], "fleet.lease_ttl");
        if (fc.lease_ttl < 300ms) fail(f["lease_ttl"], "fleet.lease_ttl must be at least 300ms (leases are renewed every third of it)");
        if (f["expected_workers"]) fc.expected_workers = count(f["expected_workers"], "fleet.expected_workers", 1);
        if (f["timeout"]) fc.timeout = duration(f["timeout"], "fleet.timeout");
        if (fc.timeout < 10ms || fc.timeout * 3 > fc.lease_ttl)
            fail(f["timeout"] ? f["timeout"] : f, "fleet.timeout must be between 10ms and a third of fleet.lease_ttl");
        if (f["on_store_failure"]) {
            const std::string mode = text(f["on_store_failure"], "fleet.on_store_failure");
            if (mode == "fail_closed") fc.on_store_failure = fleet_config::failure_mode::fail_closed;
            else if (mode != "local_share")
                fail(f["on_store_failure"], "fleet.on_store_failure: '" + mode + "' is not local_share or fail_closed");
        }
        c.fleet = std::move(fc);
    }

    void security(const YAML::Node& s, config& c) const {
        if (!s || s.IsNull()) return;
        expect_map(s, "security");
        only_keys(s, "security", {"allow_clients", "users_file", "connect_ports", "deny_destinations",
                                  "allow_destinations"});
        if (s["allow_clients"]) c.security.allow_clients = networks(s["allow_clients"], "security.allow_clients");
        if (s["deny_destinations"]) c.security.destinations.deny = networks(s["deny_destinations"], "security.deny_destinations");
        if (s["allow_destinations"]) c.security.destinations.allow = networks(s["allow_destinations"], "security.allow_destinations");
        if (const auto u = s["users_file"]; u && !u.IsNull()) {
            c.security.users_file = text(u, "security.users_file");
            std::ifstream in(c.security.users_file);
            if (!in) fail(u, "security.users_file: cannot open " + c.security.users_file);
            std::ostringstream file;
            file << in.rdbuf();
            auto users = proxy_users::parse(file.str());
            if (auto* e = std::get_if<proxy_users::load_error>(&users))
                fail(u, "security.users_file " + c.security.users_file +
                            (e->line ? ":" + std::to_string(e->line) : std::string()) + ": " + e->message);
            c.security.users = std::make_shared<const proxy_users>(std::get<proxy_users>(std::move(users)));
        }
        if (const auto p = s["connect_ports"]) {
            if (!p.IsSequence()) fail(p, "security.connect_ports must be a list");
            c.security.connect_ports.clear();
            for (const auto& port : p) {
                const auto v = count(port, "security.connect_ports", 1);
                if (v > 65535) fail(port, "security.connect_ports: port out of range");
                c.security.connect_ports.push_back(static_cast<std::uint16_t>(v));
            }
        }
    }

    void admin(const YAML::Node& a, admin_config& out) const {
        if (!a || a.IsNull()) return;
        expect_map(a, "admin");
        only_keys(a, "admin", {"token_file", "state_file"});
        if (const auto f = a["token_file"]; f && !f.IsNull()) {
            out.token_file = text(f, "admin.token_file");
            auto tokens = admin_tokens::parse(private_file(f, "admin.token_file"));
            if (auto* e = std::get_if<std::string>(&tokens)) fail(f, "admin.token_file " + out.token_file + ": " + *e);
            out.tokens = std::make_shared<const admin_tokens>(std::get<admin_tokens>(std::move(tokens)));
        }
        if (const auto f = a["state_file"]; f && !f.IsNull()) {
            out.state_file = text(f, "admin.state_file");
            if (out.state_file.empty() || out.state_file.back() == '/')
                fail(f, "admin.state_file must name a file, got '" + out.state_file + "'");
            // The file itself may not exist yet (it is written at the first override), its directory must.
            const auto slash = out.state_file.rfind('/');
            const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out.state_file.substr(0, slash);
            struct stat st {};
            if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
                fail(f, "admin.state_file: the directory " + dir + " does not exist");
        }
    }

    void tls(const YAML::Node& t, config& c) const {
        if (!t || t.IsNull()) return;
        expect_map(t, "tls");
        only_keys(t, "tls", {"mode", "ca_cert", "ca_key", "upstream_ca_file", "alpn", "intercept_exclude", "leaf_cache"});
        auto optional_text = [&](const char* key) {
            return t[key] && !t[key].IsNull() ? text(t[key], std::string("tls.") + key) : std::string();
        };
        c.tls.ca_cert = optional_text("ca_cert");
        c.tls.ca_key = optional_text("ca_key");
        c.tls.upstream_ca_file = optional_text("upstream_ca_file");
        if (const auto a = t["alpn"]) {
            if (!a.IsSequence()) fail(a, "tls.alpn must be a list");
            c.tls.alpn.clear();
            for (const auto& p : a) {
                const std::string name = text(p, "tls.alpn");
                if (name != "h2" && name != "http/1.1") fail(p, "tls.alpn: '" + name + "' is not h2 or http/1.1");
                c.tls.alpn.push_back(name);
            }
            if (c.tls.alpn.empty()) fail(a, "tls.alpn must name h2, http/1.1 or both");
        }
        if (const auto x = t["intercept_exclude"]) {
            if (!x.IsSequence()) fail(x, "tls.intercept_exclude must be a list");
            for (const auto& p : x) {
                const std::string name = text(p, "tls.intercept_exclude");
                const bool wildcard = name.starts_with("*.");
                const std::string_view bare = std::string_view(name).substr(wildcard ? 2 : 0);
                if (!valid_host_name(bare))
                    fail(p, "tls.intercept_exclude: '" + name + "' is not a host name, *.suffix or address");
                c.tls.intercept_exclude.push_back((wildcard ? "*." : "") + host_key(bare));  // matched against keys
            }
        }
        if (t["leaf_cache"]) c.tls.leaf_cache = count(t["leaf_cache"], "tls.leaf_cache", 1);
        if (t["mode"]) {
            const std::string mode = text(t["mode"], "tls.mode");
            if (mode == "intercept")
                c.tls.mode = tls_config::mode_type::intercept;
            else if (mode != "tunnel")
                fail(t["mode"], "tls.mode: '" + mode + "' is not tunnel or intercept");
        }
        if (c.tls.mode == tls_config::mode_type::intercept) {
            if (c.tls.ca_cert.empty() || c.tls.ca_key.empty())
                fail(t["mode"], "tls.mode intercept needs tls.ca_cert and tls.ca_key (politeproxy --gen-ca DIR writes them)");
        }
    }

};

// The failure of a loaded<T>: converts to any of them.
struct load_failure {
    std::string message;
    template <class T>
    operator loaded<T>() && {
        return loaded<T>(boost::system::in_place_error, std::move(message));
    }
};

}  // namespace

loaded<config> load_config_text(std::string_view yaml, std::string source) {
    reader r(source);
    try {
        const YAML::Node root = YAML::Load(std::string(yaml));
        return r.load(root);
    } catch (const load_error& e) {
        return load_failure{e.message};
    } catch (const YAML::Exception& e) {
        return load_failure{source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg};
    }
}

loaded<listen_address> parse_listen_address(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return load_failure{"expected ADDRESS:PORT, got '" + std::string(text) + "'"};
    listen_address a;
    std::string_view host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    a.host = std::string(host);
    if (!parse_ip(a.host)) return load_failure{"'" + a.host + "' is not an IP address"};
    const std::string_view port = text.substr(colon + 1);
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535)
        return load_failure{"invalid port '" + std::string(port) + "'"};
    a.port = static_cast<std::uint16_t>(value);
    return a;
}

loaded<config> load_config_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return load_failure{path + ": cannot open the file"};
    std::ostringstream text;
    text << in.rdbuf();
    return load_config_text(text.str(), path);
}

}  // namespace politeproxy
