#include "politeproxy/http1/body_reader.hpp"

#include <boost/asio/error.hpp>

#include <algorithm>
#include <cstring>

namespace politeproxy {
namespace asio = boost::asio;

body_reader::body_reader(timed_socket& in, boost::beast::flat_buffer& buffer, body_framing body)
    : in_(in), buffer_(buffer), body_(body), remaining_(body.kind == body_kind::length ? body.length : 0) {
    if (body.kind == body_kind::chunked) decoder_.emplace();
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
