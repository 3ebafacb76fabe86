// Absolute-form request targets: what is forwarded where, what is refused, and that the
// hand-read common case agrees with the full RFC 3986 parse wherever it answers.
#include "politeproxy/origin_target.hpp"

#include <doctest/doctest.h>

#include <memory_resource>
#include <string>

using namespace politeproxy;

namespace {

struct parsed {
    std::string host, host_header, path;
    std::uint16_t port = 0;
    errc why{};  // none: forwarded
    bool operator==(const parsed&) const = default;
};

template <class Variant>
parsed flatten(const Variant& v) {
    if (const auto* e = std::get_if<target_error>(&v)) return parsed{{}, {}, {}, 0, e->why};
    const auto& t = std::get<origin_target>(v);
    return parsed{std::string(t.host), std::string(t.host_header), std::string(t.path), t.port};
}

parsed parse(std::string_view target) {
    std::pmr::monotonic_buffer_resource arena;
    return flatten(parse_origin_target(target, wire_allocator{&arena}));
}

}  // namespace

TEST_CASE("a plain target gives host, port, Host header and origin-form path") {
    CHECK(parse("http://a.test/x?y=1") == parsed{"a.test", "a.test", "/x?y=1", 80});
    CHECK(parse("http://a.test:8080") == parsed{"a.test", "a.test:8080", "/", 8080});
    CHECK(parse("http://a.test?q") == parsed{"a.test", "a.test", "/?q", 80});
    CHECK(parse("http://127.0.0.1:18080/1k") == parsed{"127.0.0.1", "127.0.0.1:18080", "/1k", 18080});
    CHECK(parse("http://A.Test./%7Euser/") == parsed{"A.Test.", "A.Test.", "/%7Euser/", 80});
}

TEST_CASE("the full parse takes the rest: userinfo, IPv6, upper-case scheme") {
    CHECK(parse("http://u:p@a.test/x") == parsed{"a.test", "a.test", "/x", 80});
    CHECK(parse("http://[::1]:81/") == parsed{"::1", "[::1]:81", "/", 81});
    CHECK(parse("HTTP://a.test/") == parsed{"a.test", "a.test", "/", 80});
    CHECK(parse("http://a.test:080/") == parsed{"a.test", "a.test:080", "/", 80});
}

TEST_CASE("targets the proxy refuses, each with its reason") {
    CHECK(parse("/x").why == errc::origin_form_request);
    CHECK(parse("*").why == errc::origin_form_request);
    CHECK(parse("https://a.test/").why == errc::unsupported_scheme);
    CHECK(parse("http://a.test/x y").why == errc::bad_request);
    CHECK(parse("http://a.test/#frag").why == errc::bad_request);
    CHECK(parse("not a uri").why == errc::bad_request);
    CHECK(parse("http://a.test:0/").why == errc::bad_host);
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
        CHECK(full == parsed{std::string(plain->host), std::string(plain->host_header), std::string(plain->path), plain->port});
    }
    // The common case does take the hand-read path.
    std::pmr::monotonic_buffer_resource arena;
    CHECK(detail::parse_plain_target("http://a.bench.test:18080/1k", wire_allocator{&arena}).has_value());
}
