// Hop-by-hop stripping and Via loop detection on header fields (no sockets).
#include "politeproxy/hop_by_hop.hpp"

#include <doctest/doctest.h>

#include <memory_resource>
#include <string>
#include <vector>

using namespace politeproxy;
namespace http = boost::beast::http;

namespace {

std::vector<std::string> names(const wire_fields& fields) {
    std::vector<std::string> out;
    for (const auto& f : fields) out.emplace_back(f.name_string());
    return out;
}

}  // namespace

TEST_CASE("the fixed hop-by-hop fields go, end-to-end ones and framing stay in order") {
    std::pmr::monotonic_buffer_resource arena;
    wire_fields f(wire_allocator{&arena});
    f.insert("Server", "nginx");
    f.insert("Connection", "keep-alive");
    f.insert("Keep-Alive", "timeout=5");
    f.insert("Content-Length", "10");
    f.insert("Proxy-Connection", "keep-alive");
    f.insert("TE", "trailers");
    f.insert("Upgrade", "h2c");
    f.insert("Proxy-Authorization", "Basic eA==");
    f.insert("Proxy-Authenticate", "Basic");
    f.insert("ETag", "\"x\"");
    strip_hop_by_hop(f);
    CHECK(names(f) == std::vector<std::string>{"Server", "Content-Length", "ETag"});
}

TEST_CASE("fields that Connection names go, from every Connection field, but never framing") {
    std::pmr::monotonic_buffer_resource arena;
    wire_fields f(wire_allocator{&arena});
    f.insert("X-Before", "1");  // named after it appears
    f.insert("Connection", "x-before, close");
    f.insert("Transfer-Encoding", "chunked");
    f.insert("Close", "odd but named");
    f.insert("Connection", "X-After , Content-Length, Transfer-Encoding");
    f.insert("x-after", "2");
    f.insert("Content-Length", "3");
    f.insert("X-Kept", "4");
    strip_hop_by_hop(f);
    CHECK(names(f) == std::vector<std::string>{"Transfer-Encoding", "Content-Length", "X-Kept"});
}

TEST_CASE("a message without hop-by-hop fields is left as it was") {
    std::pmr::monotonic_buffer_resource arena;
    wire_fields f(wire_allocator{&arena});
    f.insert("Host", "a.test");
    f.insert("Accept", "*/*");
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
