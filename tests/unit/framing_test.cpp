// The framing decision (framing_reader) for requests and responses, and the framing
// lines written from it: every spelling the hostile-input table sends, decided here.
#include "politeproxy/http1/framing.hpp"

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <utility>

using namespace politeproxy;

namespace {

using field = std::pair<const char*, const char*>;  // {"TE" or "CL", value}

framing_reader read(std::initializer_list<field> fields) {
    framing_reader r;
    for (const auto& [name, value] : fields) {
        if (std::string(name) == "TE") r.transfer_encoding(value);
        else r.content_length(value);
    }
    return r;
}

framing_fault request(std::initializer_list<field> fields, body_framing* out = nullptr, unsigned version = 11) {
    body_framing f;
    const auto fault = read(fields).request(version, f);
    if (out) *out = f;
    return fault;
}

}  // namespace

TEST_CASE("a request is chunked when its codings are exactly chunked, empty list elements aside") {
    for (const char* te : {"chunked", "Chunked", "CHUNKED", ",chunked", "chunked,", " chunked ", ", ,chunked"}) {
        CAPTURE(te);
        body_framing f;
        CHECK(request({{"TE", te}}, &f) == framing_fault::none);
        CHECK(f.kind == body_kind::chunked);
    }
}

TEST_CASE("a request whose final coding is not chunked, or that names it twice, is refused") {
    for (const char* te : {"chunked, chunked", "xchunked", "gzip", "identity", "chunked, gzip", "", ",", "chunked;q=1",
                           "chunked\x01", "\"chunked\""}) {
        CAPTURE(te);
        CHECK(request({{"TE", te}}) == framing_fault::bad_transfer_encoding);
    }
    CHECK(request({{"TE", "chunked"}, {"TE", "chunked"}}) == framing_fault::bad_transfer_encoding);
    CHECK(request({{"TE", "chunked"}, {"TE", "gzip"}}) == framing_fault::bad_transfer_encoding);
}

TEST_CASE("a request coding other than chunked before it is not implemented") {
    CHECK(request({{"TE", "gzip, chunked"}}) == framing_fault::unsupported_coding);
    CHECK(request({{"TE", "gzip"}, {"TE", "chunked"}}) == framing_fault::unsupported_coding);
}

TEST_CASE("Transfer-Encoding with Content-Length, or in HTTP/1.0, is refused") {
    CHECK(request({{"TE", "chunked"}, {"CL", "5"}}) == framing_fault::both_framing_fields);
    CHECK(request({{"CL", "5"}, {"TE", "chunked"}}) == framing_fault::both_framing_fields);
    CHECK(request({{"TE", "chunked"}}, nullptr, 10) == framing_fault::transfer_encoding_in_http10);
}

TEST_CASE("Content-Length: one canonical value, or refused") {
    for (auto fields : {std::initializer_list<field>{{"CL", "5"}}, {{"CL", "005"}}, {{"CL", "00000000000000000000005"}},
                        {{"CL", "5, 5"}}, {{"CL", "5"}, {"CL", "5"}}, {{"CL", " 5 "}}, {{"CL", "5,"}}}) {
        body_framing f;
        CHECK(request(fields, &f) == framing_fault::none);
        CHECK(f.kind == body_kind::length);
        CHECK(f.length == 5);
    }
    // Above 2^63-1 a length turns negative in an origin that reads it as a signed number.
    for (const char* cl : {"5, 6", "+5", "-1", "0x5", "1e3", "", "5 5", "99999999999999999999999", "18446744073709551616",
                           "18446744073709551615", "9223372036854775808", ",", "5;x"}) {
        CAPTURE(cl);
        CHECK(request({{"CL", cl}}) == framing_fault::bad_content_length);
    }
    CHECK(request({{"CL", "5"}, {"CL", "6"}}) == framing_fault::bad_content_length);
    body_framing max;
    CHECK(request({{"CL", "9223372036854775807"}}, &max) == framing_fault::none);
    CHECK(max.length == 9223372036854775807ull);
}

TEST_CASE("a request without framing fields has no body") {
    body_framing f{body_kind::chunked, 9};
    CHECK(request({}, &f) == framing_fault::none);
    CHECK(f.kind == body_kind::none);
}

TEST_CASE("a response: chunked last, else read until the close; other codings kept for the client") {
    body_framing f;
    CHECK(read({{"TE", "gzip, chunked"}}).response(11, f) == framing_fault::none);
    CHECK(f.kind == body_kind::chunked);
    CHECK(read({{"TE", "GZip, chunked"}}).other_codings() == "gzip");
    CHECK(read({{"TE", "gzip"}}).response(11, f) == framing_fault::none);
    CHECK(f.kind == body_kind::until_close);
    CHECK(read({}).response(11, f) == framing_fault::none);
    CHECK(f.kind == body_kind::until_close);
    CHECK(read({{"CL", "7"}}).response(10, f) == framing_fault::none);
    CHECK((f.kind == body_kind::length && f.length == 7));
    CHECK(read({{"TE", "chunked, gzip"}}).response(11, f) == framing_fault::bad_transfer_encoding);
    CHECK(read({{"TE", "chunked"}, {"TE", "chunked"}}).response(11, f) == framing_fault::bad_transfer_encoding);
    CHECK(read({{"TE", "chunked"}, {"CL", "1"}}).response(11, f) == framing_fault::both_framing_fields);
    CHECK(read({{"TE", "chunked"}}).response(10, f) == framing_fault::transfer_encoding_in_http10);
}

TEST_CASE("a response's plan: bodiless statuses, and what each client is told") {
    const body_framing length{body_kind::length, 7}, chunked{body_kind::chunked, 0}, close{body_kind::until_close, 0};
    // HTTP/1.1 client: a length as it is, chunked re-chunked, a close-delimited body chunked.
    auto p = plan_response(length, 200, false, 11);
    CHECK((p.from_origin.kind == body_kind::length && p.told == body_kind::length && p.length == 7 && !p.out_chunked));
    p = plan_response(chunked, 200, false, 11);
    CHECK((p.from_origin.kind == body_kind::chunked && p.told == body_kind::chunked && p.out_chunked));
    p = plan_response(close, 200, false, 11);
    CHECK((p.from_origin.kind == body_kind::until_close && p.told == body_kind::chunked && p.out_chunked));
    CHECK_FALSE(p.ends_at_close);
    // HTTP/1.0 client: no chunked; without a length the body ends at the close.
    p = plan_response(chunked, 200, false, 10);
    CHECK((p.told == body_kind::none && !p.out_chunked && p.ends_at_close));
    CHECK_FALSE(plan_response(length, 200, false, 10).ends_at_close);
    // HEAD and 304: no body; a length or chunked is told as declared, a close is not.
    for (unsigned status : {200u, 304u}) {
        const bool head = status == 200;
        p = plan_response(length, status, head, 11);
        CHECK((p.from_origin.kind == body_kind::none && p.told == body_kind::length && !p.ends_at_close));
        p = plan_response(chunked, status, head, 11);
        CHECK((p.from_origin.kind == body_kind::none && p.told == body_kind::chunked && !p.out_chunked));
        CHECK(plan_response(close, status, head, 11).told == body_kind::none);
        CHECK_FALSE(plan_response(close, status, head, 10).ends_at_close);
    }
    // 1xx and 204: no body and no framing field (RFC 9110 sections 8.6, 6.4.1).
    for (unsigned status : {101u, 204u})
        for (const auto& declared : {length, chunked, close}) {
            p = plan_response(declared, status, false, 11);
            CHECK((p.from_origin.kind == body_kind::none && p.told == body_kind::none && !p.out_chunked));
        }
}

TEST_CASE("what is forwarded is written from the decision") {
    std::string out;
    append_framing(body_kind::length, 5, {}, out);
    append_framing(body_kind::chunked, 0, {}, out);
    append_framing(body_kind::chunked, 0, "gzip", out);
    append_framing(body_kind::none, 0, {}, out);
    append_framing(body_kind::until_close, 0, {}, out);
    CHECK(out == "Content-Length: 5\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip, chunked\r\n");
}
