// Hop-by-hop stripping and Via loop detection on header fields (no sockets).
#include "politeproxy/http1/hop_by_hop.hpp"

#include <doctest/doctest.h>

#include <initializer_list>
#include <memory_resource>
#include <string>
#include <utility>
#include <vector>

using namespace politeproxy;
namespace http = boost::beast::http;

namespace {

// Fields in the order given, from `arena`.
wire_fields fields_of(std::pmr::memory_resource& arena,
                      std::initializer_list<std::pair<std::string_view, std::string_view>> list) {
    wire_fields f(wire_allocator{&arena});
    for (const auto& [name, value] : list) f.insert(name, value);
    return f;
}

std::vector<std::string> names(const wire_fields& fields) {
    std::vector<std::string> out;
    for (const auto& f : fields) out.emplace_back(f.name_string());
    return out;
}

}  // namespace

TEST_CASE("the fixed hop-by-hop fields go, end-to-end ones and framing stay in order") {
    std::pmr::monotonic_buffer_resource arena;
    auto f = fields_of(arena, {
        {"Server", "nginx"},
        {"Connection", "keep-alive"},
        {"Keep-Alive", "timeout=5"},
        {"Content-Length", "10"},
        {"Proxy-Connection", "keep-alive"},
        {"TE", "trailers"},
        {"Upgrade", "h2c"},
        {"Proxy-Authorization", "Basic eA=="},
        {"Proxy-Authenticate", "Basic"},
        {"ETag", "\"x\""},
    });
    strip_hop_by_hop(f);
    CHECK(names(f) == std::vector<std::string>{"Server", "Content-Length", "ETag"});
}

TEST_CASE("fields that Connection names go, from every Connection field, but never framing") {
    std::pmr::monotonic_buffer_resource arena;
    auto f = fields_of(arena, {
        {"X-Before", "1"},  // named after it appears
        {"Connection", "x-before, close"},
        {"Transfer-Encoding", "chunked"},
        {"Close", "odd but named"},
        {"Connection", "X-After , Content-Length, Transfer-Encoding"},
        {"x-after", "2"},
        {"Content-Length", "3"},
        {"X-Kept", "4"},
    });
    strip_hop_by_hop(f);
    CHECK(names(f) == std::vector<std::string>{"Transfer-Encoding", "Content-Length", "X-Kept"});
}

TEST_CASE("a message without hop-by-hop fields is left as it was") {
    std::pmr::monotonic_buffer_resource arena;
    auto f = fields_of(arena, {
        {"Host", "a.test"},
        {"Accept", "*/*"},
    });
    strip_hop_by_hop(f);
    CHECK(names(f) == std::vector<std::string>{"Host", "Accept"});
}

TEST_CASE("via_contains finds this proxy's entry only as a whole entry") {
    std::pmr::monotonic_buffer_resource arena;
    wire_fields f(wire_allocator{&arena});
    const std::string me = "1.1 politeproxy-0000abcd";
    f.insert("Via", "1.0 fred, 1.1 politeproxy-0000abcdef");
    CHECK_FALSE(via_contains(f, me));
    f.insert("Via", "1.1 other,1.1 politeproxy-0000abcd (comment)");
    CHECK(via_contains(f, me));
}
