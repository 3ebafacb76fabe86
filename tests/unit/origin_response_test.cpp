// An origin's response header read by origin_response_parser: the header as it is
// forwarded (hop-by-hop and framing fields out), the values the forwarder decides on,
// and the framing decided apart.
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/framing.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <doctest/doctest.h>

#include <memory_resource>
#include <string>

using namespace politeproxy;
namespace http = boost::beast::http;

namespace {

// Feeds `raw` to `p` in one piece; returns the bytes it took.
std::size_t feed(origin_response_parser& p, std::string_view raw, boost::system::error_code& ec) {
    return p.put(boost::asio::buffer(raw.data(), raw.size()), ec);
}

std::string head_of(const origin_response_parser& p, std::string_view added = {}) {
    std::string out;
    p.write_head(added, out);
    return out;
}

}  // namespace

TEST_CASE("hop-by-hop fields are left out, the rest forwarded in order, as HTTP/1.1") {
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    boost::system::error_code ec;
    feed(p,
         "HTTP/1.0 200 Fine\r\nServer: x\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=7\r\n"
         "X-Hop: 1\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Authenticate: Basic\r\nContent-Length: 0\r\n"
         "ETag: \"e\"\r\n\r\n",
         ec);
    REQUIRE_FALSE(ec);
    CHECK(p.is_done());
    CHECK(p.status() == 200);
    CHECK(p.keep_alive_hint() == "timeout=7");
    CHECK(head_of(p, "Via: 1.1 pp\r\n") ==
          "HTTP/1.1 200 Fine\r\nServer: x\r\nETag: \"e\"\r\nVia: 1.1 pp\r\n\r\n");  // framing: decided apart
}

TEST_CASE("Retry-After is found, and still found after Connection cut fields before it") {
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    boost::system::error_code ec;
    feed(p, "HTTP/1.1 503 \r\nX-Gone: 1\r\nRetry-After: 120\r\nConnection: x-gone\r\nContent-Length: 0\r\n\r\n", ec);
    REQUIRE_FALSE(ec);
    CHECK(p.retry_after() == "120");
    // An empty reason is given the standard one.
    CHECK(head_of(p) == "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\n\r\n");
}

TEST_CASE("framing fields are decided, not copied: the head leaves them out") {
    std::pmr::monotonic_buffer_resource arena;
    boost::system::error_code ec;
    origin_response_parser chunked{wire_allocator{&arena}};
    feed(chunked, "HTTP/1.1 200 OK\r\nTransfer-Encoding: GZIP, ,chunked\r\nX: y\r\n\r\n", ec);
    REQUIRE_FALSE(ec);
    CHECK(chunked.framing().kind == body_kind::chunked);
    CHECK(chunked.other_codings() == "gzip");
    CHECK(head_of(chunked) == "HTTP/1.1 200 OK\r\nX: y\r\n\r\n");

    origin_response_parser length{wire_allocator{&arena}};
    feed(length, "HTTP/1.1 200 OK\r\nContent-Length: 005, 5\r\nContent-Length: 5\r\nX: y\r\n\r\n", ec);
    REQUIRE_FALSE(ec);
    CHECK(length.framing().kind == body_kind::length);
    CHECK(length.framing().length == 5);
    CHECK(head_of(length) == "HTTP/1.1 200 OK\r\nX: y\r\n\r\n");

    origin_response_parser until_close{wire_allocator{&arena}};
    feed(until_close, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nX: y\r\n\r\n", ec);
    REQUIRE_FALSE(ec);
    CHECK(until_close.framing().kind == body_kind::until_close);
    CHECK(until_close.other_codings() == "gzip");
}

TEST_CASE("a body of any length: the parser reads the header only") {
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    boost::system::error_code ec;
    feed(p, "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n", ec);  // 100 GB: over Beast's 8 MiB default
    REQUIRE_FALSE(ec);
    CHECK(p.framing().length == 100000000000ull);
}

TEST_CASE("framing the proxy cannot read for sure fails the response") {
    for (const char* head : {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
                             "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n",
                             "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                             "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                             "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n"}) {
        CAPTURE(head);
        std::pmr::monotonic_buffer_resource arena;
        origin_response_parser p{wire_allocator{&arena}};
        boost::system::error_code ec;
        feed(p, head, ec);
        CHECK(ec);
    }
}
