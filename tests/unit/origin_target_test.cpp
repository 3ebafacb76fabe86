// Absolute-form request targets: what is forwarded where, what is refused, and that the
// hand-read common case agrees with the full RFC 3986 parse wherever it answers.
#include "politeproxy/http1/origin_target.hpp"

#include <doctest/doctest.h>

#include <memory_resource>
#include <string>

using namespace politeproxy;

namespace {

struct parsed {
    std::string key, host_header, path;
    std::uint16_t port = 0;
    errc why{};  // none: forwarded
    bool operator==(const parsed&) const = default;
};

template <class Variant>
parsed flatten(const Variant& v) {
    if (const auto* e = std::get_if<target_error>(&v)) return parsed{{}, {}, {}, 0, e->why};
    const auto& t = std::get<origin_target>(v);
    std::string host;
    t.append_host(host);
    return parsed{t.key, host, std::string(t.path), t.port};
}

parsed parse(std::string_view target) {
    std::pmr::monotonic_buffer_resource arena;
    return flatten(parse_origin_target(target, wire_allocator{&arena}));
}

}  // namespace

TEST_CASE("a plain target gives host key, port, Host header and origin-form path") {
    CHECK(parse("http://a.test/x?y=1") == parsed{"a.test", "a.test", "/x?y=1", 80});
    CHECK(parse("http://a.test:8080") == parsed{"a.test", "a.test:8080", "/", 8080});
    CHECK(parse("http://a.test?q") == parsed{"a.test", "a.test", "/?q", 80});
    CHECK(parse("http://127.0.0.1:18080/1k") == parsed{"127.0.0.1", "127.0.0.1:18080", "/1k", 18080});
    CHECK(parse("http://A.Test./%7Euser/") == parsed{"a.test", "a.test", "/%7Euser/", 80});
}

TEST_CASE("the full parse takes the rest: IPv6, upper-case scheme, zero-padded port") {
    CHECK(parse("http://[::1]:81/") == parsed{"::1", "[::1]:81", "/", 81});
    CHECK(parse("http://[0:0:0:0:0:0:0:1]:81/") == parsed{"::1", "[::1]:81", "/", 81});
    CHECK(parse("http://[::ffff:7f00:1]/") == parsed{"127.0.0.1", "127.0.0.1", "/", 80});
    CHECK(parse("HTTP://a.test/") == parsed{"a.test", "a.test", "/", 80});
    CHECK(parse("http://a.test:080/") == parsed{"a.test", "a.test", "/", 80});
}

TEST_CASE("every spelling of an IPv4 address is one host key, and the Host sent is written from it") {
    for (const char* spelling : {"127.0.0.2", "127.2", "0x7f000002", "2130706434", "0177.0.0.02", "0x7f.0.0x0.2",
                                 "127.0.2", "127.0.0.2.", "[::ffff:127.0.0.2]", "[::ffff:7f00:2]"}) {
        CAPTURE(spelling);
        CHECK(parse(std::string("http://") + spelling + ":8080/x") == parsed{"127.0.0.2", "127.0.0.2:8080", "/x", 8080});
    }
}

TEST_CASE("CONNECT targets: host:port and nothing else") {
    const auto key_port = [](std::string_view authority) -> std::pair<std::string, int> {
        const auto v = parse_connect_target(authority);
        if (const auto* e = std::get_if<target_error>(&v)) return {"error", static_cast<int>(e->why)};
        return {std::get<connect_target>(v).key, std::get<connect_target>(v).port};
    };
    CHECK(key_port("A.Test:443") == std::pair<std::string, int>{"a.test", 443});
    CHECK(key_port("[::1]:8443") == std::pair<std::string, int>{"::1", 8443});
    CHECK(key_port("[::ffff:127.0.0.1]:443") == std::pair<std::string, int>{"127.0.0.1", 443});
    CHECK(key_port("2130706433:443") == std::pair<std::string, int>{"127.0.0.1", 443});
    CHECK(key_port("a.test:0443") == std::pair<std::string, int>{"a.test", 443});
    for (const char* bad : {"a.test:99999", "a.test:65536", "a.test:0", "a.test:443x", "a.test:", "a.test", ":443",
                            "a.test:+443", "a.test:-1", "a.test:443/x", "http://a.test:443", "[::1]", "[::1]443",
                            "[127.0.0.1]:443", "[::1%eth0]:443", "a.test: 443"}) {
        CAPTURE(bad);
        CHECK(key_port(bad).first == "error");
    }
    CHECK(key_port("u@a.test:443").first == "error");
    CHECK(key_port("1.2.3.4.5:443").first == "error");
}

TEST_CASE("targets the proxy refuses, each with its reason") {
    CHECK(parse("/x").why == errc::origin_form_request);
    CHECK(parse("*").why == errc::origin_form_request);
    CHECK(parse("https://a.test/").why == errc::unsupported_scheme);
    CHECK(parse("http://a.test/x y").why == errc::bad_request);
    CHECK(parse("http://a.test/#frag").why == errc::bad_request);
    CHECK(parse("not a uri").why == errc::bad_request);
    CHECK(parse("http://a.test:0/").why == errc::bad_host);
    CHECK(parse("http://a.test:99999/").why == errc::bad_host);
    CHECK(parse("http://a.test:65536/").why == errc::bad_host);
    CHECK(parse("http://u:p@a.test/x").why == errc::bad_request);
    CHECK(parse("http://1.2.3.4.5/").why == errc::bad_host);
    // The full parse (an upper-case scheme takes it there) reads the host itself: Boost.URL
    // 1.81 takes "1.2.3.4.evil.test" for host 1.2.3.4 and path ".evil.test/x".
    CHECK(parse("HTTP://1.2.3.4.evil.test/x") == parsed{"1.2.3.4.evil.test", "1.2.3.4.evil.test", "/x", 80});
    CHECK(parse("HTTP://1.2.3.4x/") == parsed{"1.2.3.4x", "1.2.3.4x", "/", 80});
    CHECK(parse("http://foo.123/").why == errc::bad_host);
    CHECK(parse("http://a.0x1f/").why == errc::bad_host);
    CHECK(parse("http://a..test/").why == errc::bad_host);
    CHECK(parse("http:///x").why == errc::bad_host);
    CHECK(parse("http://a%2eb/").why == errc::bad_host);
}

TEST_CASE("wherever the hand-read path answers, the full parse answers the same") {
    const char* targets[] = {
        "http://a.test/",         "http://a.test",          "http://a.test:1/",     "http://a.test:65535/x",
        "http://a.test:65536/",   "http://a.test:/",        "http://a.test:99999/", "http://a-b_c.test/p/q",
        "http://1.2.3.4/",        "http://1.2.3.999/",      "http://a.test/%41%4a", "http://a.test/%4",
        "http://a.test/%zz",      "http://a.test/?a=b&c=d", "http://a.test//x",     "http://a.test/a:b@c;d=e,f!$'()*+",
        "http://a.test/~x-y.z_w", "http://x/",              "http://a.test?",       "http://a.test/é",
        "http://a.test/\"",       "http://a.test/{}",       "http://-a.test/",      "http://a.test/\\",
    };
    for (const char* target : targets) {
        CAPTURE(target);
        std::pmr::monotonic_buffer_resource arena;
        const auto plain = detail::parse_plain_target(target, wire_allocator{&arena});
        if (!plain) continue;
        const parsed full = flatten(detail::parse_any_target(target, wire_allocator{&arena}));
        std::string host;
        plain->append_host(host);
        CHECK(full == parsed{plain->key, host, std::string(plain->path), plain->port});
    }
    // The common case does take the hand-read path.
    std::pmr::monotonic_buffer_resource arena;
    CHECK(detail::parse_plain_target("http://a.bench.test:18080/1k", wire_allocator{&arena}).has_value());
}

TEST_CASE("inside intercepted TLS: origin-form or https:// for the connection's host, anything else 421") {
    std::pmr::monotonic_buffer_resource arena;
    const connect_target tunnel{"shop.test", std::nullopt, 443};
    auto in_tls = [&](std::string_view target, std::string_view host, bool options = false) {
        return flatten(parse_intercepted_target(target, host, options, tunnel, "shop.test", wire_allocator{&arena}));
    };
    const parsed ok{"shop.test", "shop.test", "/cart?id=1", 443};
    CHECK(in_tls("/cart?id=1", "shop.test") == ok);
    CHECK(in_tls("/cart?id=1", "SHOP.test:443") == ok);
    CHECK(in_tls("https://shop.test/cart?id=1", "ignored.test") == ok);
    CHECK(in_tls("https://shop.test:443/cart?id=1", "") == ok);
    CHECK(in_tls("https://shop.test", "").path == "/");
    CHECK(in_tls("*", "shop.test", true).path == "/");

    CHECK(in_tls("/cart", "other.test").why == errc::misdirected_request);
    CHECK(in_tls("/cart", "shop.test:8443").why == errc::misdirected_request);  // another origin
    CHECK(in_tls("/cart", "").why == errc::misdirected_request);
    CHECK(in_tls("/cart", "shop.test.evil.test").why == errc::misdirected_request);
    CHECK(in_tls("https://other.test/cart", "shop.test").why == errc::misdirected_request);
    CHECK(in_tls("/cart", "[::1]").why == errc::misdirected_request);
    CHECK(in_tls("http://shop.test/cart", "shop.test").why == errc::bad_request);
    CHECK(in_tls("*", "shop.test").why == errc::bad_request);  // only OPTIONS has "*"

    // An IP literal tunnel: the Host may spell the address any way
    const connect_target by_ip{"127.0.0.1", std::nullopt, 8443};
    const auto t = parse_intercepted_target("/", "0x7f000001:8443", false, by_ip, "127.0.0.1", wire_allocator{&arena});
    REQUIRE(std::holds_alternative<origin_target>(t));
    std::string host;
    std::get<origin_target>(t).append_host(host);
    CHECK(host == "127.0.0.1:8443");
}
