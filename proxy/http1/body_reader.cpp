#include "politeproxy/http1/body_reader.hpp"

#include "politeproxy/base/char_class.hpp"

#include <boost/asio/error.hpp>

#include <algorithm>
#include <cstring>

namespace politeproxy {
namespace asio = boost::asio;

namespace {

// "name: value\r\n" lines, as chunked_decoder checked them: tchar names, OWS around values.
void parse_trailers(std::string_view lines, std::vector<field>& out) {
    while (!lines.empty()) {
        const std::size_t end = lines.find("\r\n");
        std::string_view line = lines.substr(0, end);
        lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 2);
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string name = lower_case(line.substr(0, colon));
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
        if (trailer_allowed(name)) out.push_back({std::move(name), std::string(value)});
    }
}

}  // namespace

bool trailer_allowed(std::string_view name) {
    constexpr std::string_view refused[] = {"content-length", "transfer-encoding", "host",       "trailer",
                                            "te",             "connection",        "keep-alive", "upgrade",
                                            "content-type",   "content-encoding",  "content-range",
                                            "proxy-connection"};
    return std::find(std::begin(refused), std::end(refused), name) == std::end(refused);
}

void append_trailer_section(std::span<const field> trailers, std::string& out) {
    out += "0\r\n";
    for (const auto& f : trailers) {
        if (!trailer_allowed(f.name)) continue;
        append_field_line(f.name, f.value, out);
    }
    out += "\r\n";
}

body_reader::body_reader(timed_socket& in, boost::beast::flat_buffer& buffer, body_framing body)
    : in_(in), buffer_(buffer), body_(body), remaining_(body.kind == body_kind::length ? body.length : 0) {
    if (body.kind == body_kind::chunked) {
        decoder_.emplace();
        decoder_->keep_trailers(raw_trailers_);
    }
    ended_ = body.kind == body_kind::none || (body.kind == body_kind::length && body.length == 0);
}

task<body_reader::piece> body_reader::next(std::span<char> room, clock::duration idle) {
    for (;;) {
        if (ended_) co_return piece{0, true};
        std::size_t got = 0;
        if (body_.kind == body_kind::length) {
            got = static_cast<std::size_t>(std::min<std::uint64_t>({buffer_.size(), remaining_, room.size()}));
            std::memcpy(room.data(), buffer_.data().data(), got);
            buffer_.consume(got);
            remaining_ -= got;
            ended_ = remaining_ == 0;
        } else {
            got = take_body(buffer_, decoder_ ? &*decoder_ : nullptr, room);
            if (decoder_ && decoder_->failed()) co_return piece{0, false, {relay_end::malformed, {}, decoder_->error()}};
            ended_ = decoder_ && decoder_->done();
            if (ended_ && !raw_trailers_.empty()) parse_trailers(raw_trailers_, trailers_);
        }
        if (got > 0 || ended_) co_return piece{got, ended_};
        in_.expires_after(idle);
        auto [ec, n] = co_await in_.async_read_some(buffer_.prepare(relay_buffers::read_room), use_tuple);
        in_.expires_never();
        if (ec == asio::error::eof && body_.kind == body_kind::until_close) {
            ended_ = true;  // the close is this body's end
            continue;
        }
        if (ec) co_return piece{0, false, {relay_end::read_failed, ec}};  // a body cut short
        buffer_.commit(n);
    }
}

}  // namespace politeproxy
