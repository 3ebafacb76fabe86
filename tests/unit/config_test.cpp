#include "config_loading.hpp"
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/tls/config_check.hpp"
#include "politeproxy/policy/public_suffixes.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono;

namespace {

using testing::load_error;
using testing::load_ok;

const sys_days today = sys_days{year{2026} / 12 / 2};

}  // namespace

TEST_CASE("an empty file gives the SPEC defaults") {
    const config c = load_ok("");
    CHECK(c.listen.text() == "127.0.0.1:3128");
    CHECK(c.admin_listen.text() == "127.0.0.1:9464");
    CHECK(c.defaults.concurrency == 2);
    CHECK(c.defaults.rate == 1.0);
    CHECK(c.defaults.burst == 1.0);
    CHECK(c.defaults.queue.max_waiting == 1000);
    CHECK(c.defaults.queue.max_wait == 60s);
    CHECK(c.defaults.timeouts.connect == 10s);
    CHECK(c.security.connect_ports == std::vector<std::uint16_t>{443});
    CHECK_FALSE(c.security.destinations.permitted(*parse_ip("127.0.0.1")));
    CHECK_FALSE(c.security.destinations.permitted(*parse_ip("10.1.2.3")));
    CHECK(c.security.destinations.permitted(*parse_ip("93.184.216.34")));
}

TEST_CASE("the most specific host entry wins") {
    const config c = load_ok(R"(
defaults: { concurrency: 2, rate: 1 }
hosts:
  "*.example.com": { concurrency: 1 }
  "*.api.example.com": { concurrency: 1, rate: 0.5 }
  api.example.com:
    concurrency: 8
    rate: 20
    reason: "Documented API limit"
)");
    CHECK(c.policy_for("api.example.com", today).concurrency == 8);
    CHECK(c.policy_for("v2.api.example.com", today).rate == 0.5);
    CHECK(c.policy_for("www.example.com", today).concurrency == 1);
    CHECK(c.policy_for("www.example.com", today).rate == 1.0);  // inherited from defaults
    CHECK(c.policy_for("example.com", today).concurrency == 2);  // *.x does not match x
    CHECK(c.policy_for("other.org", today).concurrency == 2);
}

TEST_CASE("raising above defaults needs a reason, naming the host and line") {
    for (const char* field : {"concurrency: 3", "rate: 2", "burst: 5", "adaptive: { hard_max: 9 }"}) {
        const std::string err = load_error(std::string("hosts:\n  big.example:\n    ") + field + "\n");
        CHECK(err.find("test.yaml:2:") != std::string::npos);
        CHECK(err.find("big.example") != std::string::npos);
        CHECK(err.find("reason") != std::string::npos);
    }
    load_error("hosts:\n  big.example: { concurrency: 3, reason: \"  \" }\n");
    CHECK(load_ok("hosts:\n  big.example: { concurrency: 3, reason: \"agreed\" }\n").hosts[0].reason == "agreed");
    load_ok("hosts:\n  small.example: { concurrency: 1, rate: 0.1 }\n");  // lowering needs none
}

TEST_CASE("an expired override is ignored") {
    const config c = load_ok(R"(
hosts:
  old.example: { concurrency: 1, expires: 2026-12-01 }
  new.example: { concurrency: 1, expires: 2026-12-02 }
)");
    CHECK(c.policy_for("old.example", today).concurrency == 2);
    CHECK(c.policy_for("new.example", today).concurrency == 1);  // valid through its day
    CHECK(describe(c, today).find("EXPIRED") != std::string::npos);
}

TEST_CASE("durations take units") {
    const config c = load_ok("defaults:\n  queue: { max_wait: 1500ms }\n  timeouts: { connect: 2m, idle: 1h }\n");
    CHECK(c.defaults.queue.max_wait == 1500ms);
    CHECK(c.defaults.timeouts.connect == 2min);
    CHECK(c.defaults.timeouts.idle == 1h);
    CHECK(load_error("defaults:\n  queue: { max_wait: 30 }\n").find("duration") != std::string::npos);
}

TEST_CASE("unknown keys and bad values are errors with file and line") {
    CHECK(load_error("listen: 127.0.0.1:3128\nlisten_typo: 1\n").starts_with("test.yaml:2: unknown key 'listen_typo'"));
    CHECK(load_error("defaults:\n  queue:\n    max_wating: 3\n").starts_with("test.yaml:3: unknown key 'max_wating'"));
    CHECK(load_error("hosts:\n  a.example: { concurency: 1 }\n").find("unknown key 'concurency'") != std::string::npos);
    CHECK(load_error("defaults: { rate: 0 }\n").find("positive") != std::string::npos);
    CHECK(load_error("defaults: { rate: -1 }\n").find("positive") != std::string::npos);
    CHECK(load_error("defaults: { concurrency: 0 }\n").find("concurrency") != std::string::npos);
    CHECK(load_error("listen: localhost:80\n").find("IP address") != std::string::npos);
    CHECK(load_error("security: { deny_destinations: [privat] }\n").find("privat") != std::string::npos);
    CHECK(load_error("defaults: [1, 2\n").starts_with("test.yaml:"));
}

TEST_CASE("an unknown key kind is refused") {
    CHECK(load_error("defaults: { key: street }\n").find("not host, domain or ip") != std::string::npos);
}

TEST_CASE("groups: a concurrency cap per level") {
    const config c = load_ok("groups:\n  domain: { concurrency: 4 }\n");
    CHECK(c.groups.domain == 4u);
    CHECK_FALSE(c.groups.ip);
    CHECK(load_ok("groups: { ip: { concurrency: 2 } }\n").groups.ip == 2u);
    CHECK(load_ok("defaults: { key: ip }\n").key == config::key_kind::ip);
    CHECK(load_error("defaults: { key: ip }\ngroups: { domain: { concurrency: 2 } }\n").find("needs defaults.key: host") !=
          std::string::npos);
    CHECK(load_error("defaults: { key: ip }\ngroups: { ip: { concurrency: 2 } }\n").find("is the gate itself") !=
          std::string::npos);
    CHECK(load_ok("defaults: { key: domain }\ngroups: { ip: { concurrency: 2 } }\n").groups.ip == 2u);
    CHECK(load_error("groups: { domain: { concurrency: 0 } }\n").find("groups.domain.concurrency") != std::string::npos);
    CHECK(load_error("groups: { domain: {} }\n").find("'concurrency' is required") != std::string::npos);
    CHECK(load_error("groups: { domain: { rate: 1 } }\n").find("unknown key 'rate'") != std::string::npos);
    CHECK(load_error("groups: { street: { concurrency: 1 } }\n").find("unknown key 'street'") != std::string::npos);
}

TEST_CASE("the Public Suffix List is loaded with a config that needs registrable domains, and only then") {
    // Loaded with the file (at start, on a reload's thread): never lazily while a request waits.
    for (const char* yaml : {"defaults: { key: domain }\n", "groups: { domain: { concurrency: 4 } }\n"}) {
        CAPTURE(yaml);
        const config c = load_ok(yaml);
        REQUIRE(c.suffixes);
        CHECK(c.suffixes->registrable_domain("a.b.example.co.uk") == "example.co.uk");
    }
    CHECK_FALSE(load_ok("defaults: { key: host }\n").suffixes);
}

TEST_CASE("robots: off by default, honor with its bounds") {
    CHECK_FALSE(load_ok("").robots.honor);
    CHECK_FALSE(load_ok("robots: { crawl_delay: off }\n").robots.honor);
    const config c = load_ok("robots: { crawl_delay: honor, max_delay: 10s, cache_ttl: 1h }\n");
    CHECK(c.robots.honor);
    CHECK(c.robots.max_delay == std::chrono::seconds(10));
    CHECK(c.robots.cache_ttl == std::chrono::hours(1));
    CHECK(load_error("robots: { crawl_delay: maybe }\n").find("not off or honor") != std::string::npos);
    CHECK(load_error("robots: { max_delay: 0s }\n").find("robots.max_delay must be positive") != std::string::npos);
    CHECK(load_error("robots: { delay: 1s }\n").find("unknown key 'delay'") != std::string::npos);
}

TEST_CASE("fleet: the store's URL and the lease settings") {
    const config c = load_ok("fleet:\n  redis: redis://:s3cret@redis.internal:6380/2\n  lease_ttl: 10s\n"
                             "  expected_workers: 6\n  on_store_failure: fail_closed\n  timeout: 250ms\n");
    REQUIRE(c.fleet);
    CHECK(c.fleet->kind == fleet_config::topology::single);
    CHECK(c.fleet->nodes == std::vector<fleet_config::endpoint>{{"redis.internal", 6380}});
    CHECK(c.fleet->password == "s3cret");
    CHECK(c.fleet->db == 2);
    CHECK(c.fleet->lease_ttl == std::chrono::seconds(10));
    CHECK(c.fleet->expected_workers == 6);
    CHECK(c.fleet->on_store_failure == fleet_config::failure_mode::fail_closed);
    CHECK(c.fleet->timeout == std::chrono::milliseconds(250));
    const config d = load_ok("fleet: { redis: \"redis://[::1]\" }\n");
    CHECK(d.fleet->nodes == std::vector<fleet_config::endpoint>{{"::1", 6379}});
    CHECK(d.fleet->lease_ttl == std::chrono::seconds(30));
    CHECK(d.fleet->on_store_failure == fleet_config::failure_mode::local_share);
    CHECK_FALSE(load_ok("").fleet);

    CHECK(load_error("fleet: { lease_ttl: 30s }\n").find("needs 'redis'") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"http://x\" }\n").find("redis://") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://x:99999\" }\n").find("invalid port") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://user:pw@x\" }\n").find("only a password") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://x/abc\" }\n").find("database") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://x\", on_store_failure: open }\n").find("local_share or fail_closed") !=
          std::string::npos);
    // A renewal every third of the TTL must land before the TTL runs out.
    CHECK(load_error("fleet: { redis: \"redis://x\", lease_ttl: 1s, timeout: 500ms }\n").find("a third") !=
          std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://x\", expected_workers: 0 }\n").find("expected_workers") !=
          std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://x\", ttl: 1s }\n").find("unknown key 'ttl'") != std::string::npos);
}

TEST_CASE("fleet: Redis Cluster seeds and Sentinel's master") {
    using topology = fleet_config::topology;
    const config c = load_ok("fleet: { redis: \"redis+cluster://:pw@10.0.0.1:7000,node-b:7001,[::1]\" }\n");
    CHECK(c.fleet->kind == topology::cluster);
    CHECK(c.fleet->nodes ==
          std::vector<fleet_config::endpoint>{{"10.0.0.1", 7000}, {"node-b", 7001}, {"::1", 6379}});
    CHECK(c.fleet->password == "pw");
    CHECK(load_ok("fleet: { redis: \"redis+cluster://a:1/0\" }\n").fleet->db == 0);
    const config s = load_ok("fleet: { redis: \"redis+sentinel://s1:26379,s2:26380/pp-master/3\" }\n");
    CHECK(s.fleet->kind == topology::sentinel);
    CHECK(s.fleet->nodes == std::vector<fleet_config::endpoint>{{"s1", 26379}, {"s2", 26380}});
    CHECK(s.fleet->master_name == "pp-master");
    CHECK(s.fleet->db == 3);
    CHECK(load_error("fleet: { redis: \"redis+sentinel://s1:26379\" }\n").find("master's name") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis+cluster://a:1/2\" }\n").find("only database 0") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis://a:1,b:2\" }\n").find("one node only") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis+cluster://a:1,,b:2\" }\n").find("no host") != std::string::npos);
    CHECK(load_error("fleet: { redis: \"redis+cluster://a:0\" }\n").find("invalid port") != std::string::npos);
}

TEST_CASE("tls: intercept needs a CA; its keys are checked") {
    const std::string e = load_error("tls: { mode: intercept }\n");
    CHECK(e.find("tls.ca_cert and tls.ca_key") != std::string::npos);
    CHECK(e.starts_with("test.yaml:1"));
    CHECK(load_error("tls: { mode: bump }\n").find("not tunnel or intercept") != std::string::npos);
    // The CA's files are the TLS layer's to check.
    const auto no_ca = tls::check_interception_ca(
        load_config_text("tls: { mode: intercept, ca_cert: /nonexistent/ca.pem, ca_key: /nonexistent/ca.key }\n",
                         "test.yaml"),
        "test.yaml");
    REQUIRE_FALSE(no_ca.has_value());
    CHECK(no_ca.error().starts_with("test.yaml: tls: "));
    CHECK(no_ca.error().find("/nonexistent/ca.pem") != std::string::npos);
    CHECK(load_error("tls: { alpn: [spdy] }\n").find("spdy") != std::string::npos);
    CHECK(load_error("tls: { alpn: [] }\n").find("must name") != std::string::npos);
    CHECK(load_error("tls: { intercept_exclude: ['bad host!'] }\n").find("bad host!") != std::string::npos);

    const config c = load_ok("tls: { intercept_exclude: [Pinned.Example.com, '*.bank.test'], leaf_cache: 50 }\n");
    CHECK(c.tls.mode == tls_config::mode_type::tunnel);
    CHECK(c.tls.leaf_cache == 50);
    CHECK_FALSE(c.tls.intercepts("a.test"));  // tunnel mode intercepts nothing
    tls_config t = c.tls;
    t.mode = tls_config::mode_type::intercept;
    CHECK(t.intercepts("a.test"));
    CHECK_FALSE(t.intercepts("pinned.example.com"));
    CHECK_FALSE(t.intercepts("www.bank.test"));
    CHECK(t.intercepts("bank.test"));
}

TEST_CASE("security and resolve") {
    const config c = load_ok(R"(
resolve:
  "*.bench.test": 127.0.0.1
  exact.test: ::1
security:
  allow_clients: [10.0.0.0/8]
  connect_ports: [443, 8443]
  allow_destinations: [127.0.0.0/8]
)");
    CHECK(c.static_address("a.bench.test") == "127.0.0.1");
    CHECK(c.static_address("exact.test") == "::1");
    CHECK_FALSE(c.static_address("bench.test"));
    CHECK(c.connect_port_allowed(8443));
    CHECK_FALSE(c.connect_port_allowed(80));
    CHECK(c.security.destinations.permitted(*parse_ip("127.0.0.1")));
    CHECK_FALSE(c.security.destinations.permitted(*parse_ip("::1")));
    CHECK_FALSE(c.security.destinations.permitted(*parse_ip("192.168.1.1")));
}

TEST_CASE("limits: the request line and field count bounds have SPEC defaults and are read") {
    const config d = load_ok("");
    CHECK(d.limits.request_line_bytes == 16384);
    CHECK(d.limits.request_header_fields == 100);
    const config c = load_ok("limits: {request_line_bytes: 4096, request_header_fields: 50}\n");
    CHECK(c.limits.request_line_bytes == 4096);
    CHECK(c.limits.request_header_fields == 50);
    CHECK(load_error("limits: {request_header_fields: 0}\n").find("limits.request_header_fields") != std::string::npos);
    CHECK(load_error("limits: {request_lines: 5}\n").find("request_lines") != std::string::npos);
}

TEST_CASE("upstream_protocol: auto by default, http1 or h2c per host, anything else refused") {
    const config c = load_ok(R"(
hosts:
  grpc.internal.test: { upstream_protocol: h2c }
  legacy.test: { upstream_protocol: http1 }
)");
    CHECK(c.defaults.upstream == upstream_protocol::automatic);
    CHECK(c.policy_for("grpc.internal.test", today).upstream == upstream_protocol::h2c);
    CHECK(c.policy_for("legacy.test", today).upstream == upstream_protocol::http1);
    CHECK(c.policy_for("other.test", today).upstream == upstream_protocol::automatic);
    CHECK(load_error("defaults: { upstream_protocol: h2 }\n").find("upstream_protocol must be auto, http1 or h2c") !=
          std::string::npos);
}

TEST_CASE("an open proxy is named: beyond loopback, clients beyond loopback, no users") {
    auto cfg = load_config_text("listen: 0.0.0.0:3128\nsecurity: { allow_clients: [10.0.0.0/8] }\n", "t.yaml");
    REQUIRE(cfg.has_value());
    CHECK(open_proxy_error(*cfg));
    cfg->listen = {"127.0.0.1", 3128};  // what --listen 127.0.0.1:3128 does
    CHECK_FALSE(open_proxy_error(*cfg));
    auto narrow = load_config_text("listen: 0.0.0.0:3128\nsecurity: { allow_clients: [127.0.0.0/16, \"::1/128\"] }\n", "t.yaml");
    REQUIRE(narrow.has_value());
    CHECK_FALSE(open_proxy_error(*narrow));  // only loopback clients
    auto wide = load_config_text("listen: 0.0.0.0:3128\nsecurity: { allow_clients: [127.0.0.0/7] }\n", "t.yaml");
    REQUIRE(wide.has_value());
    CHECK(open_proxy_error(*wide));  // /7 reaches past loopback
    CHECK(load_error("metrics: { per_user: true }\n").find("needs security.users_file") != std::string::npos);
}

TEST_CASE("throttle: statuses and header patterns, defaults and per host") {
    const config plain = load_ok("");
    CHECK(plain.defaults.throttle.statuses() == std::vector<unsigned>{429, 503});
    CHECK(plain.defaults.throttle.headers().empty());

    const config c = load_ok(R"(
defaults:
  throttle: { statuses: [403, 429, 503, 430], headers: { CF-Mitigated: "^challenge$" } }
hosts:
  quiet.example: { throttle: { statuses: [429] } }
)");
    CHECK(c.defaults.throttle.statuses() == std::vector<unsigned>{403, 429, 503, 430});
    REQUIRE(c.defaults.throttle.headers().size() == 1);
    CHECK(c.defaults.throttle.headers()[0].name == "cf-mitigated");
    const auto& quiet = c.policy_for("quiet.example", today).throttle;
    CHECK(quiet.statuses() == std::vector<unsigned>{429});
    CHECK(quiet.headers().size() == 1);  // a key left out keeps the defaults'

    const auto none = [](std::string_view) { return std::string_view(); };
    CHECK(c.defaults.throttle.heard(430, none));
    CHECK_FALSE(quiet.heard(503, none));
    CHECK(quiet.heard(200, [](std::string_view name) { return name == "cf-mitigated" ? "challenge" : ""; }));
    CHECK_FALSE(quiet.heard(200, [](std::string_view name) { return name == "cf-mitigated" ? "challenges" : ""; }));

    CHECK(load_error("defaults: { throttle: { statuses: [700] } }\n").find("throttle.statuses: 700") != std::string::npos);
    CHECK(load_error("defaults: { throttle: { statuses: 429 } }\n").find("must be a list") != std::string::npos);
    CHECK(load_error("defaults: { throttle: { headers: { x: \"(\" } } }\n").find("throttle.headers.x") != std::string::npos);
    CHECK(load_error("defaults: { throttle: { speed: 1 } }\n").find("unknown key 'speed'") != std::string::npos);
}

TEST_CASE("throttle: a long hostile value is matched in linear time, its first 1 KiB only") {
    const config c = load_ok("defaults: { throttle: { headers: { x: \"(a|a)*b\" } } }\n");
    const std::string value(100000, 'a');
    CHECK_FALSE(c.defaults.throttle.heard(200, [&](std::string_view) { return std::string_view(value); }));
    const std::string late = std::string(2000, 'a') + "b";
    CHECK_FALSE(c.defaults.throttle.heard(200, [&](std::string_view) { return std::string_view(late); }));
}

// admin: the token file (mode 0600, parsed at load) and the state file's directory.
#include "politeproxy/policy/admin_tokens.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

TEST_CASE("admin: token_file of mode 0600 loaded, others and missing ones refused; state_file's directory") {
    char path[] = "/tmp/admin-tokens-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    ::close(fd);
    const std::string token = "0123456789abcdef0123";
    { std::ofstream(path) << "# operators\nalice:" << token << "\n"; }
    ::chmod(path, 0600);
    const std::string yaml = std::string("admin:\n  token_file: ") + path + "\n  state_file: /tmp/politeproxy-state.json\n";
    const config c = load_ok(yaml);
    CHECK(c.admin.token_file == path);
    REQUIRE(c.admin.tokens);
    CHECK(c.admin.tokens->size() == 1);
    CHECK(c.admin.tokens->name_for("Bearer " + token) == "alice");
    CHECK(c.admin.state_file == "/tmp/politeproxy-state.json");
    const std::string described = describe(c, today);
    CHECK(described.find(std::string("# admin: token_file ") + path + " (1 tokens)") != std::string::npos);
    CHECK(described.find(token) == std::string::npos);

    ::chmod(path, 0644);
    CHECK(load_error(yaml).find("test.yaml:2: admin.token_file: " + std::string(path) + " is readable by others") == 0);
    ::chmod(path, 0640);
    CHECK(load_error(yaml).find("readable by others") != std::string::npos);
    ::chmod(path, 0400);
    CHECK(load_ok(yaml).admin.tokens->size() == 1);

    { std::ofstream(path) << "alice:" << token << "\nbob:short\n"; }
    CHECK(load_error(yaml).find("test.yaml:2: admin.token_file " + std::string(path) + ": line 2: the token of bob") == 0);
    std::remove(path);
    CHECK(load_error(yaml).find("test.yaml:2: admin.token_file: cannot open " + std::string(path)) == 0);

    CHECK(load_error("admin:\n  state_file: /nonexistent-dir/state.json\n").find(
              "test.yaml:2: admin.state_file: the directory /nonexistent-dir does not exist") == 0);
    CHECK(load_error("admin:\n  state_file: /tmp/\n").find("must name a file") != std::string::npos);
    CHECK(load_error("admin:\n  colour: red\n").find("unknown key 'colour' in admin") != std::string::npos);
    const config none = load_ok("admin:\n  token_file: null\n  state_file: null\n");
    CHECK_FALSE(none.admin.tokens);
    CHECK(none.admin.state_file.empty());
    CHECK(load_ok("").admin.token_file.empty());
}

TEST_CASE("dns: servers as ADDRESS:PORT, TTL bounds and the Happy Eyeballs delay, with SPEC defaults") {
    const config d = load_ok("");
    CHECK(d.dns.servers.empty());
    CHECK(d.dns.min_ttl == 5s);
    CHECK(d.dns.max_ttl == 1h);
    CHECK(d.dns.negative_ttl == 30s);
    CHECK(d.dns.stale_for == 5min);
    CHECK(d.dns.max_names == 100000);
    CHECK(d.dns.connection_attempt_delay == 250ms);
    const config c = load_ok(R"(
dns:
  servers: ["127.0.0.1:5353", "[::1]:53"]
  min_ttl: 1s
  max_ttl: 10m
  negative_ttl: 0s
  stale_for: 1m
  max_names: 10
  connection_attempt_delay: 100ms
)");
    REQUIRE(c.dns.servers.size() == 2);
    CHECK(c.dns.servers[0].host == "127.0.0.1");
    CHECK(c.dns.servers[0].port == 5353);
    CHECK(c.dns.servers[1].host == "::1");
    CHECK(c.dns.min_ttl == 1s);
    CHECK(c.dns.max_ttl == 10min);
    CHECK(c.dns.negative_ttl == 0s);
    CHECK(c.dns.stale_for == 1min);
    CHECK(c.dns.max_names == 10);
    CHECK(c.dns.connection_attempt_delay == 100ms);
    CHECK(load_error("dns: {servers: [\"ns.example:53\"]}\n").find("not an IP address") != std::string::npos);
    CHECK(load_error("dns: {servers: [\"127.0.0.1:0\"]}\n").find("port 0") != std::string::npos);
    CHECK(load_error("dns: {servers: \"127.0.0.1:53\"}\n").find("a list") != std::string::npos);
    CHECK(load_error("dns: {min_ttl: 2h}\n").find("dns.min_ttl") != std::string::npos);
    CHECK(load_error("dns: {connection_attempt_delay: 5s}\n").find("connection_attempt_delay") != std::string::npos);
    CHECK(load_error("dns: {max_names: 0}\n").find("dns.max_names") != std::string::npos);
    CHECK(load_error("dns: {cache: 5}\n").find("cache") != std::string::npos);
}
