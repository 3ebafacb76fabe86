#pragma once
// The configuration, parsed once into plain structs (see SPEC.md "Configuration").
// Shared as std::shared_ptr<const config>; a reload builds a new one and swaps it.
#include "politeproxy/policy/address_filter.hpp"
#include "politeproxy/policy/host_policy.hpp"
#include "politeproxy/policy/parent_route.hpp"
#include "politeproxy/base/clock.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

class public_suffixes;

class proxy_users;

class admin_tokens;

using namespace std::chrono_literals;

struct listen_address {
    std::string host;  ///< an IP literal, without brackets
    std::uint16_t port = 0;
    std::string text() const;
};

/// One registry entry under `hosts:`.
struct host_override {
    std::string pattern;  ///< exact host key, or "*.suffix"
    host_policy policy;   ///< defaults with this entry's fields applied
    std::string reason;
    std::optional<std::chrono::sys_days> expires;  ///< ignored after this day (UTC)
    int line = 0;

    bool expired(std::chrono::sys_days today) const { return expires && today > *expires; }
};

/// `resolve:` entry: a static address for a name, consulted before DNS.
struct resolve_entry {
    std::string pattern;
    std::string address;
    ip_bytes bytes{};  ///< the address, parsed
};

/// Size and lifetime bounds that are not per host (`limits:`).
struct limits_config {
    std::size_t request_line_bytes = 16 * 1024;     ///< a longer request line -> 414
    std::size_t request_header_bytes = 64 * 1024;   ///< larger -> 431
    std::size_t request_header_fields = 100;        ///< more field lines -> 431
    std::size_t response_header_bytes = 64 * 1024;  ///< larger -> 502
    std::size_t h2_max_concurrent_streams = 100;     ///< advertised to HTTP/2 clients; more are refused
    clock::duration host_idle_ttl = 60s;             ///< an idle host's gate is forgotten after this
    /// Requests parked across all hosts (about 13 KB each, measured); beyond -> 503.
    std::size_t max_parked = 50000;
    /// Open client connections; beyond, a new one is closed as it is accepted.
    std::size_t max_client_connections = 10000;
};

/// The built-in SSRF guard and client list (SPEC.md defaults).
std::vector<ip_network> default_allow_clients();
address_filter default_destinations();

struct security_config {
    std::vector<ip_network> allow_clients = default_allow_clients();
    std::string users_file;                           ///< empty: no proxy authentication
    std::shared_ptr<const proxy_users> users;         ///< loaded from users_file (checked at load)
    std::vector<std::uint16_t> connect_ports{443};
    address_filter destinations = default_destinations();
    /// Not from the file: the server fills it in once its listeners are bound (a reload keeps it).
    own_listeners own;
};

/// admin: who may change things through the admin API, and where its overrides persist.
struct admin_config {
    std::string token_file;                      ///< empty: the API is read-only
    std::shared_ptr<const admin_tokens> tokens;  ///< loaded from token_file (checked at load)
    std::string state_file;                      ///< empty: API overrides last until a restart (alone, no fleet)
};

/// tls: how CONNECT is served. In `intercept` mode the proxy completes TLS with the
/// client itself (a leaf signed by ca_cert for each name) and gates every request inside.
struct tls_config {
    enum class mode_type { tunnel, intercept };
    mode_type mode = mode_type::tunnel;
    std::string ca_cert, ca_key;  ///< intercept: the CA that signs the leaves (checked at load)
    std::string upstream_ca_file;   ///< extra trust for origins (the system store is always used)
    std::vector<std::string> alpn{"h2", "http/1.1"};
    std::vector<std::string> intercept_exclude;  ///< exact names or "*.suffix": always tunneled
    std::size_t leaf_cache = 10000;               ///< leaf certificates kept (least recently used go)

    bool intercepts(std::string_view host) const;
    bool operator==(const tls_config&) const = default;
};

/// fleet: one bound per host across many processes, through a Redis store (SPEC.md).
struct fleet_config {
    enum class failure_mode {
        local_share,  ///< store unreachable: each process enforces limit/expected_workers, rate/expected_workers
        fail_closed,  ///< store unreachable: answer 503
    };
    /// What the URL names: one Redis, a Redis Cluster (seed nodes), or the master that a
    /// set of sentinels names.
    enum class topology { single, cluster, sentinel };
    struct endpoint {
        std::string host;  ///< a name or an address
        std::uint16_t port = 6379;
        bool operator==(const endpoint&) const = default;
    };
    /// The URL as written: redis://[:password@]host[:port][/db],
    /// redis+cluster://[:password@]h1:p1,h2:p2,... or redis+sentinel://[:password@]s1:p1,.../MASTER
    std::string redis;
    topology kind = topology::single;
    std::vector<endpoint> nodes{{"127.0.0.1", 6379}};  ///< the node; the seeds; the sentinels
    std::string master_name;                           ///< sentinel: the master's name
    std::string password;                              ///< the data nodes' (sentinels take none)
    unsigned db = 0;                                   ///< single and sentinel; a cluster has only 0
    clock::duration lease_ttl = 30s;  ///< a lease not renewed for this long is gone (a crashed process)
    std::size_t expected_workers = 1;
    failure_mode on_store_failure = failure_mode::local_share;
    clock::duration timeout = 1s;  ///< one round trip to the store; longer counts as the store being down

    bool operator==(const fleet_config&) const = default;
};

/// robots: robots.txt (RFC 9309) for every client (SPEC.md).
/// `dns:`: the resolver, its cache of names, and how a connect uses the addresses.
struct dns_config {
    std::vector<listen_address> servers;  ///< ADDRESS:PORT each; empty: /etc/resolv.conf's
    clock::duration min_ttl = 5s;         ///< a record set's TTL is clamped to [min_ttl, max_ttl]
    clock::duration max_ttl = 1h;
    clock::duration negative_ttl = 30s;  ///< cap of a "no such name" answer's TTL (RFC 2308)
    clock::duration stale_for = 5min;    ///< an expired answer is served this long when its refresh fails
    std::size_t max_names = 100000;      ///< names cached; the least recently used go first
    clock::duration connection_attempt_delay = 250ms;  ///< Happy Eyeballs (RFC 8305): the next address after
    bool operator==(const dns_config&) const = default;
};

struct robots_config {
    bool honor = false;               ///< crawl_delay: honor (lowers a host's rate to 1/delay); off by default
    bool enforce = false;             ///< disallow: enforce (a disallowed path is answered 403); off by default
    std::string user_agent;           ///< the product token groups are chosen by; empty: the request's User-Agent
    clock::duration max_delay = 30s;  ///< longer delays are capped
    clock::duration cache_ttl = 24h;  ///< robots.txt is fetched once per origin per ttl

    /// Whether robots.txt is read at all (either mode).
    bool read() const { return honor || enforce; }
    bool operator==(const robots_config&) const = default;
};

/// clients: several crawlers sharing one proxy (SPEC.md). Absent: every request is
/// nobody's, and each host has one FIFO queue.
struct clients_config {
    enum class identity : std::uint8_t { user, address, header };
    identity identify_by = identity::user;
    std::string header;  ///< identify_by header: its name, lower case (stripped before forwarding)
    bool fair = true;    ///< share: fair (weighted round robin per host), else fifo
    std::vector<std::pair<std::string, unsigned>> weights;  ///< by name; others weigh 1
    std::size_t max_waiting = 10000;    ///< one client's requests waiting for a slot, all hosts
    std::size_t max_in_flight = 10000;  ///< one client's requests holding a slot, all hosts

    unsigned weight_of(std::string_view name) const;
    bool operator==(const clients_config&) const = default;
};

/// The name of requests whose client is not known (no credentials, no header).
inline constexpr std::string_view anonymous_client = "anonymous";

/// One entry of `parents:` (SPEC.md): a proxy that carries requests on to their origins.
struct parent_config {
    std::string name;
    std::string host;  ///< an IP literal (without brackets) or a name, resolved when connecting
    std::uint16_t port = 0;
    /// The Proxy-Authorization value the parent gets ("Basic ..."), empty without credentials.
    std::string authorization;
    std::size_t max_connections = 256;  ///< requests and tunnels it carries at once
    std::size_t weight = 1;
    clock::duration retry_after = 30s;  ///< down this long (doubling, jittered: policy/parent_health)
    unsigned fail_after = 3;            ///< consecutive failures of its own that mark it down

    /// "host:port" (an IPv6 host in brackets): what it is connected to, and its log name.
    std::string authority() const;
    bool operator==(const parent_config&) const = default;
};

/// Fills host, port, password and db of `out` from redis://[:password@]host[:port][/db]
/// (an IPv6 host in brackets); the error text otherwise.
std::optional<std::string> parse_redis_url(std::string_view url, fleet_config& out);

struct config {
    std::string source;  ///< the file it came from
    listen_address listen{"127.0.0.1", 3128};
    listen_address admin_listen{"127.0.0.1", 9464};
    unsigned workers = 0;  ///< 0 = one per core
    clock::duration drain_timeout = 30s;
    host_policy defaults;
    std::vector<host_override> hosts;
    std::vector<resolve_entry> resolve;
    /// defaults.key: what one gate is for. `domain`: every host of one registrable domain
    /// (Public Suffix List) shares one gate, named by the domain. `ip`: every host
    /// connected to at one address shares one gate, named by the address.
    enum class key_kind : std::uint8_t { host, domain, ip };
    key_kind key = key_kind::host;
    /// groups: caps across hosts (SPEC.md), each a concurrency only; absent = no cap.
    struct group_caps {
        std::optional<std::size_t> domain;  ///< every host of one registrable domain together
        std::optional<std::size_t> ip;      ///< every host connected to at one address together
        bool operator==(const group_caps&) const = default;
    } groups;
    std::size_t max_host_series = 10000;
    std::size_t max_client_series = 10000;  ///< metrics.max_client_series
    std::optional<clients_config> clients;  ///< absent: one queue per host, nobody's requests
    bool per_user_metrics = false;  ///< metrics.per_user: user_requests_total{user} (with security.users_file)
    limits_config limits;
    security_config security;
    admin_config admin;
    tls_config tls;
    std::optional<fleet_config> fleet;  ///< absent: this process alone
    dns_config dns;
    robots_config robots;
    std::vector<parent_config> parents;  ///< parent proxies by name (routes refer to them by index)
    std::vector<parent_route> routes;    ///< first match wins; no match: direct
    /// The Public Suffix List, loaded with the file when `key: domain` or groups.domain
    /// need it (null otherwise): read once per load, never while a request waits.
    std::shared_ptr<const public_suffixes> suffixes;

    /// The override that applies to `key` on `today` (most specific match, unexpired),
    /// or nullptr for defaults.
    const host_override* override_for(std::string_view key, std::chrono::sys_days today) const;
    const host_policy& policy_for(std::string_view key, std::chrono::sys_days today) const;

    /// The `resolve:` entry for `host`, if any.
    const resolve_entry* static_entry(std::string_view host) const;
    /// Its address text, if any.
    std::optional<std::string_view> static_address(std::string_view host) const;

    bool connect_port_allowed(std::uint16_t port) const;
};

/// Why this config would be an open proxy, if it would: `listen` is not a loopback
/// address, security.allow_clients admits more than loopback, and no security.users_file
/// asks for credentials. Checked on the final addresses: after --listen (main, for a run
/// and for --check-config) and at each reload (with the running listen).
std::optional<std::string> open_proxy_error(const config& c);

/// Today's date (UTC), the granularity of `expires`.
std::chrono::sys_days utc_today();

/// The effective per-host table printed by --check-config.
std::string describe(const config& c, std::chrono::sys_days today);

}  // namespace politeproxy
