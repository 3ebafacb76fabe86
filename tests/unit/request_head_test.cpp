// check_request_head: what a client request's header alone decides, on headers parsed
// by the same parser the proxy uses.
#include "politeproxy/http1/request_head.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <doctest/doctest.h>

#include <memory_resource>
#include <string>

using namespace politeproxy;

namespace {

request_verdict check(std::string_view head, limits_config limits = {}, bool tunnels = true) {
    std::pmr::monotonic_buffer_resource arena;
    request_header_parser p(std::piecewise_construct, std::make_tuple(), std::make_tuple(wire_allocator{&arena}));
    boost::system::error_code ec;
    p.put(boost::asio::buffer(head.data(), head.size()), ec);
    REQUIRE_FALSE(ec);
    REQUIRE(p.is_header_done());
    return check_request_head(p.get(), limits, tunnels);
}

std::string head_with(std::string_view request_line, std::string_view fields) {
    return std::string(request_line) + "\r\nHost: a.test\r\n" + std::string(fields) + "\r\n";
}

}  // namespace

TEST_CASE("a plain request passes, with its framing") {
    auto v = check(head_with("GET http://a.test/ HTTP/1.1", ""));
    CHECK_FALSE(v.refusal);
    CHECK(v.body.kind == body_kind::none);
    v = check(head_with("POST http://a.test/ HTTP/1.1", "Transfer-Encoding: ,chunked\r\n"));
    CHECK_FALSE(v.refusal);
    CHECK(v.body.kind == body_kind::chunked);
    v = check(head_with("POST http://a.test/ HTTP/1.1", "Content-Length: 005\r\n"));
    CHECK((v.body.kind == body_kind::length && v.body.length == 5));
}

TEST_CASE("refusals, each with its answer") {
    CHECK(check(head_with("TRACE http://a.test/ HTTP/1.1", "")).refusal == errc::method_not_allowed);
    CHECK(check(head_with("POST http://a.test/ HTTP/1.1", "Transfer-Encoding: gzip\r\n")).refusal == errc::bad_framing);
    CHECK(check(head_with("POST http://a.test/ HTTP/1.1", "Transfer-Encoding: gzip, chunked\r\n")).refusal ==
          errc::unsupported_transfer_coding);
    CHECK(check(head_with("POST http://a.test/ HTTP/1.0", "Transfer-Encoding: chunked\r\n")).refusal ==
          errc::bad_framing);
    CHECK(check(head_with("GET http://a.test/ HTTP/1.1", "Host: b.test\r\n")).refusal == errc::bad_request);
    CHECK(check("GET http://a.test/ HTTP/1.1\r\n\r\n").refusal == errc::bad_request);
    CHECK_FALSE(check("GET http://a.test/ HTTP/1.0\r\n\r\n").refusal);
    CHECK(check(head_with("CONNECT a.test:443 HTTP/1.1", "Content-Length: 1\r\n")).refusal == errc::bad_framing);
    CHECK(check(head_with("OPTIONS http://a.test/ HTTP/1.1", "Max-Forwards: x\r\n")).refusal == errc::bad_request);
}

TEST_CASE("the request line and the field count have their limits") {
    limits_config limits;
    limits.request_line_bytes = 64;
    const std::string at_limit = "GET http://a.test/" + std::string(64 - 27, 'x') + " HTTP/1.1";
    REQUIRE(at_limit.size() == 64);
    CHECK_FALSE(check(head_with(at_limit, ""), limits).refusal);
    CHECK(check(head_with("GET http://a.test/" + std::string(64 - 26, 'x') + " HTTP/1.1", ""), limits).refusal ==
          errc::request_line_too_long);

    std::string fields;
    for (int i = 0; i < 99; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";  // + Host = 100
    CHECK_FALSE(check(head_with("GET http://a.test/ HTTP/1.1", fields)).refusal);
    fields += "X-last: v\r\n";
    CHECK(check(head_with("GET http://a.test/ HTTP/1.1", fields)).refusal == errc::header_too_large);
}

TEST_CASE("a head the parser refused is answered by what its bytes show") {
    namespace http = boost::beast::http;
    limits_config limits;
    limits.request_line_bytes = 32;
    const std::string long_line = "GET http://a.test/" + std::string(40, 'x') + " HTTP/1.1\r\nHost: a\r\n";
    CHECK(refuse_unparsed_head(http::error::header_limit, long_line, false, limits).why == errc::request_line_too_long);
    CHECK(refuse_unparsed_head(http::error::header_limit, "GET http://a.test/ HTTP/1.1\r\nX: " + std::string(99, 'v'),
                               false, limits).why == errc::header_too_large);
    CHECK(refuse_unparsed_head(http::error::bad_version, "GET http://a/ HTTP/2.0\r\n\r\n", false, limits).why ==
          errc::version_not_supported);
    CHECK(refuse_unparsed_head(http::error::bad_version, "GET http://a/ http/1.1\r\n\r\n", false, limits).why ==
          errc::bad_request);
    CHECK(refuse_unparsed_head(http::error::bad_field, "GET http://a/ HTTP/1.1\r\nX : y\r\n\r\n", false, limits).why ==
          errc::bad_request);
}

TEST_CASE("one huge field after a short request line is a header too large, not a long request line") {
    // As the session reads: the parser takes the start line out of the buffer as soon as
    // it is whole, so what is left to judge begins with the fields.
    limits_config limits;
    std::pmr::monotonic_buffer_resource arena;
    request_header_parser p(std::piecewise_construct, std::make_tuple(), std::make_tuple(wire_allocator{&arena}));
    p.header_limit(static_cast<std::uint32_t>(limits.request_header_bytes));
    std::string bytes = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Big: " + std::string(70 * 1024, 'v');
    boost::system::error_code ec;
    std::string_view rest(bytes);
    rest.remove_prefix(p.put(boost::asio::buffer(rest.data(), rest.size()), ec));
    if (ec == boost::beast::http::error::need_more) rest.remove_prefix(p.put(boost::asio::buffer(rest.data(), rest.size()), ec));
    REQUIRE(ec == boost::beast::http::error::header_limit);
    CHECK(refuse_unparsed_head(ec, rest, !p.get().method_string().empty(), limits).why == errc::header_too_large);
}

TEST_CASE("Max-Forwards on OPTIONS: 0 is answered here, more is forwarded one less") {
    auto v = check(head_with("OPTIONS http://a.test/ HTTP/1.1", "Max-Forwards: 0\r\n"));
    CHECK(v.answer_options);
    v = check(head_with("OPTIONS http://a.test/ HTTP/1.1", "Max-Forwards: 5\r\n"));
    CHECK_FALSE(v.answer_options);
    CHECK(v.max_forwards == 4);
    CHECK(check(head_with("OPTIONS * HTTP/1.1", "")).answer_options);
    v = check(head_with("GET http://a.test/ HTTP/1.1", "Max-Forwards: 0\r\n"));  // only OPTIONS and TRACE
    CHECK_FALSE(v.answer_options);
    CHECK(v.max_forwards == -1);
}

TEST_CASE("a CONNECT passes where it opens a tunnel, and is refused inside intercepted TLS, where it opens none") {
    const std::string connect = "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n";
    CHECK_FALSE(check(connect).refusal);
    const auto inside = check(connect, {}, false);
    CHECK(inside.refusal == errc::bad_request);
    CHECK(std::string_view(inside.details).find("no tunnel") != std::string_view::npos);
    CHECK_FALSE(check(head_with("GET https://a.test/ HTTP/1.1", ""), {}, false).refusal);
}
