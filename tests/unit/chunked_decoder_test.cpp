// The strict chunked decoder: good bodies decode whole whatever the split of the input,
// and every malformed form fails at once, at the byte that breaks it.
#include "politeproxy/http1/chunked_decoder.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using namespace politeproxy;

namespace {

struct decoded {
    std::string body;
    std::size_t consumed = 0;
    bool done = false;
    bool failed = false;
};

// Feeds `input` in pieces of `step` bytes, into a room of `room_size` bytes at a time.
decoded decode(std::string_view input, std::size_t step = 1 << 20, std::size_t room_size = 1 << 20) {
    chunked_decoder d;
    decoded out;
    std::string room(room_size, '\0');
    std::size_t fed = 0;
    while (!d.done() && !d.failed()) {
        const std::size_t available = std::min(input.size(), fed + step);
        if (out.consumed == available) {
            if (available == input.size()) break;  // wants more than there is
            fed = available;
            continue;
        }
        const auto r = d.decode(input.substr(out.consumed, available - out.consumed), room);
        out.body.append(room.data(), r.written);
        out.consumed += r.consumed;
        if (r.consumed == 0 && r.written == 0) fed = available;
    }
    out.done = d.done();
    out.failed = d.failed();
    return out;
}

}  // namespace

TEST_CASE("good chunked bodies decode whole, however the input and the room are split") {
    const std::string_view cases[][2] = {
        {"5\r\nhello\r\n0\r\n\r\n", "hello"},
        {"05\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"},
        {"5;ext=1\r\nhello\r\n0\r\n\r\n", "hello"},
        {"5 ;a=b ; c = \"q\\\"x\" \r\nhello\r\n0;last\r\n\r\n", "hello"},
        {"A\r\n0123456789\r\n0\r\nX-T: 1\r\nY: two words\r\n\r\n", "0123456789"},
        {"0\r\n\r\n", ""},
    };
    for (const auto& [input, body] : cases) {
        for (std::size_t step : {1, 2, 3, 7, 1000}) {
            for (std::size_t room : {1, 4, 1000}) {
                CAPTURE(input);
                CAPTURE(step);
                CAPTURE(room);
                const auto d = decode(input, step, room);
                CHECK(d.done);
                CHECK(d.body == body);
                CHECK(d.consumed == input.size());
            }
        }
    }
}

TEST_CASE("bytes after the last chunk are left for the next message") {
    const auto d = decode("3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n");
    CHECK(d.done);
    CHECK(d.body == "abc");
    CHECK(d.consumed == 13);
}

TEST_CASE("malformed chunked bodies fail at once, without waiting for more bytes") {
    for (std::string_view input :
         {"0x5\r\nhello\r\n0\r\n\r\n", "+5\r\nhello\r\n", "-5\r\nhello\r\n", " 5\r\nhello\r\n", "5 \r\nhello\r\n",
          "g\r\n", "\r\n", "10000000000000000\r\n", "5\nhello\n0\n\n", "5\rhello", "5\r\nhelloXX\r\n0\r\n\r\n",
          "5\r\nhello\n0\r\n\r\n", "5;\r\nhello\r\n", "5;a=\r\nhello\r\n", "5;a=\"x\r\nhello\r\n", "5;a b\r\n",
          "5\r\nhello\r\n0\r\nX-T 1\r\n\r\n", "5\r\nhello\r\n0\r\nX-T: \x01\r\n\r\n", "5\r\nhello\r\n0\r\n\r\r",
          "5\r\nhello\r\n0\r\n\n"}) {
        CAPTURE(input);
        const auto d = decode(input);
        CHECK(d.failed);
        CHECK_FALSE(d.done);
    }
}

TEST_CASE("a size over 64 bits is refused, leading zeros are not counted; a long chunk line is refused") {
    chunked_decoder d;
    char room[4];
    d.decode("ffffffffffffffff\r\nab", room);
    CHECK_FALSE(d.failed());
    const auto padded = decode("00000000000000000005\r\nhello\r\n0\r\n\r\n");
    CHECK((padded.done && padded.body == "hello"));
    const std::string long_ext = "1;" + std::string(chunked_decoder::max_line_bytes, 'a') + "\r\n";
    CHECK(decode(long_ext).failed);
    const std::string big_trailer = "0\r\nX: " + std::string(chunked_decoder::max_trailer_bytes, 'v') + "\r\n\r\n";
    CHECK(decode(big_trailer).failed);
    CHECK(decode("0\r\nX: " + std::string(chunked_decoder::max_trailer_bytes - 16, 'v') + "\r\n\r\n").done);
}

TEST_CASE("kept trailers are the trailer section's field lines, however the input is split") {
    const std::string_view input = "3\r\nabc\r\n0\r\nX-T: 1\r\nY:two words \r\n\r\nGET";
    for (std::size_t step : {1, 2, 5, 1000}) {
        CAPTURE(step);
        chunked_decoder d;
        std::string trailers;
        d.keep_trailers(trailers);
        std::string room(16, '\0');
        std::size_t at = 0;
        while (!d.done() && !d.failed() && at < input.size()) {
            const auto r = d.decode(input.substr(at, std::min(step, input.size() - at)), room);
            at += r.consumed;
        }
        CHECK(d.done());
        CHECK(trailers == "X-T: 1\r\nY:two words \r\n");
    }
    chunked_decoder without;
    std::string room(16, '\0');
    without.decode("0\r\n\r\n", room);
    CHECK(without.done());
}
