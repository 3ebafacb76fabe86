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
    CHECK(p.is_header_done());
    CHECK(p.keep_alive());  // HTTP/1.0 with keep-alive
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

TEST_CASE("whether the origin keeps the connection: its version and Connection field") {
    struct row {
        const char* head;
        bool keep;
    };
    for (const row r : {row{"HTTP/1.1 200 OK\r\n\r\n", true}, row{"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false},
                        row{"HTTP/1.1 200 OK\r\nConnection: x, CLOSE\r\n\r\n", false},
                        row{"HTTP/1.0 200 OK\r\n\r\n", false}, row{"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", true},
                        row{"HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\n\r\n", false},
                        row{"HTTP/1.2 200 OK\r\n\r\n", true}}) {
        CAPTURE(r.head);
        std::pmr::monotonic_buffer_resource arena;
        origin_response_parser p{wire_allocator{&arena}};
        boost::system::error_code ec;
        feed(p, r.head, ec);
        REQUIRE_FALSE(ec);
        CHECK(p.keep_alive() == r.keep);
    }
}

TEST_CASE("the header arrives in pieces: nothing is consumed until it is whole, the rest stays") {
    const std::string_view raw =
        "HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 3\r\nX-B:  b \r\nRetry-After: 7\r\nX-C:c\r\n\r\nabc";
    for (std::size_t cut = 0; cut <= raw.size(); ++cut) {
        CAPTURE(cut);
        std::pmr::monotonic_buffer_resource arena;
        origin_response_parser p{wire_allocator{&arena}};
        boost::system::error_code ec;
        const std::size_t first = feed(p, raw.substr(0, cut), ec);
        const std::size_t header = raw.size() - 3;
        if (cut < header) {
            CHECK(first == 0);
            CHECK(ec == http::error::need_more);
            CHECK(feed(p, raw, ec) == header);  // the same bytes again, and the rest
        } else {
            CHECK(first == header);
        }
        REQUIRE_FALSE(ec);
        CHECK(p.is_header_done());
        CHECK(p.framing().length == 3);
        CHECK(p.retry_after() == "7");
        CHECK(head_of(p) == "HTTP/1.1 200 OK\r\nServer: s\r\nX-B: b\r\nRetry-After: 7\r\nX-C: c\r\n\r\n");
    }
}

TEST_CASE("empty values are forwarded as empty values") {
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    boost::system::error_code ec;
    feed(p, "HTTP/1.1 200 OK\r\n-:\r\nY: \r\nZ:\t\r\n\r\n", ec);
    REQUIRE_FALSE(ec);
    CHECK(head_of(p) == "HTTP/1.1 200 OK\r\n-: \r\nY: \r\nZ: \r\n\r\n");
}

TEST_CASE("Retry-After is found wherever it stands among the lines copied as they came") {
    for (const char* head : {"HTTP/1.1 429 Slow\r\nRetry-After: 30\r\nA: 1\r\n\r\n",
                             "HTTP/1.1 429 Slow\r\nA: 1\r\nRetry-After: 30\r\nB: 2\r\n\r\n",
                             "HTTP/1.1 429 Slow\r\nConnection: keep-alive\r\nRetry-After: 30\r\n\r\n",
                             "HTTP/1.1 429 Slow\r\nA:1\r\nRetry-After:\t30 \r\nRetry-After: 99\r\n\r\n"}) {
        CAPTURE(head);
        std::pmr::monotonic_buffer_resource arena;
        origin_response_parser p{wire_allocator{&arena}};
        boost::system::error_code ec;
        feed(p, head, ec);
        REQUIRE_FALSE(ec);
        CHECK(p.retry_after() == "30");
    }
}

TEST_CASE("a malformed status line or field line fails the header as soon as its line is in") {
    using namespace std::literals;
    struct row {
        std::string_view head;  // no empty line: the failure must not wait for the header's end
        http::error why;
    };
    for (const row r : {row{"HTTP/2.0 200 OK\r\n", http::error::bad_version}, row{"ICY 200 OK\r\n", http::error::bad_version},
                        row{"http/1.1 200 OK\r\n", http::error::bad_version}, row{"<html>", http::error::bad_version},
                        row{"HTTP/1.1 20 OK\r\n", http::error::bad_status},
                        row{"HTTP/1.1 099 Low\r\n", http::error::bad_status},
                        row{"HTTP/1.1 2000 OK\r\n", http::error::bad_status},
                        row{"HTTP/1.1  200 OK\r\n", http::error::bad_status},
                        row{"HTTP/1.1 200 O\x01K\r\n", http::error::bad_reason},
                        row{"HTTP/1.1 200 OK\n", http::error::bad_line_ending},
                        row{"HTTP/1.1 200 OK\r\nX: a\n", http::error::bad_line_ending},
                        row{"HTTP/1.1 200 OK\r\nX: a\rb\r\n", http::error::bad_value},
                        row{"HTTP/1.1 200 OK\r\nX: a\0b\r\n"sv, http::error::bad_value},
                        row{"HTTP/1.1 200 OK\r\nX: a\x7f\r\n", http::error::bad_value},
                        row{"HTTP/1.1 200 OK\r\nX : a\r\n", http::error::bad_field},
                        row{"HTTP/1.1 200 OK\r\n: a\r\n", http::error::bad_field},
                        row{"HTTP/1.1 200 OK\r\nX(y): a\r\n", http::error::bad_field},
                        row{"HTTP/1.1 200 OK\r\nno colon\r\n", http::error::bad_field},
                        row{"HTTP/1.1 200 OK\r\n Lead: a\r\n", http::error::bad_field},
                        row{"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n", http::error::bad_field}}) {
        const std::string head(r.head);
        CAPTURE(head);
        std::pmr::monotonic_buffer_resource arena;
        origin_response_parser p{wire_allocator{&arena}};
        boost::system::error_code ec;
        feed(p, head, ec);
        CHECK(ec == r.why);
        CHECK_FALSE(p.is_header_done());
    }
}

TEST_CASE("the header limit counts the whole header, its empty line included") {
    const std::string raw = "HTTP/1.1 200 OK\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
    for (const std::size_t limit : {raw.size() - 1, raw.size()}) {
        CAPTURE(limit);
        std::pmr::monotonic_buffer_resource arena;
        origin_response_parser p{wire_allocator{&arena}};
        p.header_limit(limit);
        boost::system::error_code ec;
        feed(p, raw, ec);
        if (limit < raw.size())
            CHECK(ec == http::error::header_limit);
        else
            CHECK_FALSE(ec);
    }
    // A header that never ends is refused once it passes the limit, not read forever.
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    p.header_limit(64);
    boost::system::error_code ec;
    feed(p, "HTTP/1.1 200 OK\r\nX: " + std::string(100, 'a'), ec);
    CHECK(ec == http::error::header_limit);
}

TEST_CASE("an origin that closes mid-header leaves a partial message") {
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    boost::system::error_code ec;
    feed(p, "HTTP/1.1 200 OK\r\nX: y\r\n", ec);
    CHECK(ec == http::error::need_more);
    CHECK(p.got_some());
    p.put_eof(ec);
    CHECK(ec == http::error::partial_message);
}

TEST_CASE("field names are known in any case, and only those names: same length, other tchars, stay fields") {
    std::pmr::monotonic_buffer_resource arena;
    origin_response_parser p{wire_allocator{&arena}};
    boost::system::error_code ec;
    // Each look-alike differs from a known name by one tchar: setting bit 0x20 turns no
    // tchar but a letter's other case into a letter, '-' or a digit, so none passes.
    feed(p,
         "HTTP/1.1 200 OK\r\ncOnNeCtIoN: X-A\r\nCONTENT-LENGTH: 2\r\nupgrade: h2c\r\nX-A: 1\r\n"
         "Content^Length: 3\r\nConnectio~: 4\r\nKeep-Alive2: 5\r\nUpgrad%: 6\r\n\r\n",
         ec);
    REQUIRE_FALSE(ec);
    CHECK(p.framing().kind == body_kind::length);
    CHECK(p.framing().length == 2);
    CHECK(head_of(p) == "HTTP/1.1 200 OK\r\nContent^Length: 3\r\nConnectio~: 4\r\nKeep-Alive2: 5\r\nUpgrad%: 6\r\n\r\n");
}
