#include "politeproxy/http1/chunked_decoder.hpp"

#include "politeproxy/base/char_class.hpp"
#include "politeproxy/http1/framing.hpp"

#include <algorithm>
#include <cstring>

namespace politeproxy {

namespace {

constexpr unsigned max_size_digits = 16;  // 64 bits

// qdtext and the characters of a field value: HTAB, SP, VCHAR, obs-text.
bool is_text(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

}  // namespace

bool chunked_decoder::fail(const char* why) {
    state_ = state::failed;
    error_ = why;
    return false;
}

chunked_decoder::result chunked_decoder::decode(std::string_view input, std::span<char> room) {
    result r;
    while (r.consumed < input.size() && state_ != state::done && state_ != state::failed) {
        if (state_ == state::data) {
            const std::size_t n = static_cast<std::size_t>(
                std::min<std::uint64_t>({remaining_, input.size() - r.consumed, room.size() - r.written}));
            if (n == 0) break;  // the room is full
            std::memcpy(room.data() + r.written, input.data() + r.consumed, n);
            r.consumed += n;
            r.written += n;
            remaining_ -= n;
            if (remaining_ == 0) state_ = state::data_cr;
            continue;
        }
        if (!step(static_cast<unsigned char>(input[r.consumed]))) break;
        ++r.consumed;
    }
    return r;
}

bool chunked_decoder::step(unsigned char c) {
    if (state_ <= state::size_lf && ++line_ > max_line_bytes) return fail("chunk line too long");
    if (state_ >= state::trailer_start && state_ <= state::final_lf && ++trailer_ > max_trailer_bytes)
        return fail("trailer section too large");
    // A field line's bytes, once they passed (a failure later fails the whole body).
    if (trailers_out_ && state_ >= state::trailer_start && state_ <= state::trailer_lf &&
        !(state_ == state::trailer_start && c == '\r'))
        *trailers_out_ += static_cast<char>(c);
    switch (state_) {
    case state::size_start:
    case state::size: {
        const int v = hex_value(c);
        if (v >= 0) {
            // Leading zeros are digits too (1*HEXDIG); what counts is the value's size.
            if ((remaining_ != 0 || v != 0) && ++digits_ > max_size_digits) return fail("chunk size over 64 bits");
            remaining_ = remaining_ * 16 + static_cast<unsigned>(v);
            state_ = state::size;
            return true;
        }
        if (state_ == state::size_start) return fail("chunk size is not hex digits");
        if (c == ';') state_ = state::ext_name_start;
        else if (is_ows(c)) state_ = state::size_bws;
        else if (c == '\r') state_ = state::size_lf;
        else return fail("bad character after the chunk size");
        return true;
    }
    case state::size_bws:  // whitespace is only allowed before an extension
        if (c == ';') state_ = state::ext_name_start;
        else if (!is_ows(c)) return fail("whitespace after the chunk size without an extension");
        return true;
    case state::ext_name_start:
        if (is_ows(c)) return true;
        if (!is_tchar(c)) return fail("bad chunk extension name");
        state_ = state::ext_name;
        return true;
    case state::ext_name:
        if (is_tchar(c)) return true;
        state_ = state::ext_after_name;
        [[fallthrough]];
    case state::ext_after_name:
        if (is_ows(c)) return true;
        if (c == '=') state_ = state::ext_value_start;
        else if (c == ';') state_ = state::ext_name_start;
        else if (c == '\r') state_ = state::size_lf;
        else return fail("bad chunk extension");
        return true;
    case state::ext_value_start:
        if (is_ows(c)) return true;
        if (c == '"') state_ = state::ext_quoted;
        else if (is_tchar(c)) state_ = state::ext_token;
        else return fail("bad chunk extension value");
        return true;
    case state::ext_token:
        if (is_tchar(c)) return true;
        state_ = state::ext_after_value;
        [[fallthrough]];
    case state::ext_after_value:
        if (is_ows(c)) return true;
        if (c == ';') state_ = state::ext_name_start;
        else if (c == '\r') state_ = state::size_lf;
        else return fail("bad chunk extension");
        return true;
    case state::ext_quoted:
        if (c == '"') state_ = state::ext_after_value;
        else if (c == '\\') state_ = state::ext_quoted_pair;
        else if (!is_text(c)) return fail("bad character in a quoted chunk extension");
        return true;
    case state::ext_quoted_pair:
        if (!is_text(c)) return fail("bad character in a quoted chunk extension");
        state_ = state::ext_quoted;
        return true;
    case state::size_lf:
        if (c != '\n') return fail("chunk line not ended by CRLF");
        line_ = 0;
        digits_ = 0;
        state_ = remaining_ == 0 ? state::trailer_start : state::data;
        return true;
    case state::data_cr:
        if (c != '\r') return fail("chunk data not followed by CRLF");
        state_ = state::data_lf;
        return true;
    case state::data_lf:
        if (c != '\n') return fail("chunk data not followed by CRLF");
        state_ = state::size_start;
        return true;
    case state::trailer_start:
        if (c == '\r') state_ = state::final_lf;
        else if (is_tchar(c)) state_ = state::trailer_name;
        else return fail("bad trailer field");
        return true;
    case state::trailer_name:
        if (c == ':') state_ = state::trailer_value;
        else if (!is_tchar(c)) return fail("bad trailer field name");
        return true;
    case state::trailer_value:
        if (c == '\r') state_ = state::trailer_lf;
        else if (!is_text(c)) return fail("bad character in a trailer field");
        return true;
    case state::trailer_lf:
        if (c != '\n') return fail("trailer line not ended by CRLF");
        state_ = state::trailer_start;
        return true;
    case state::final_lf:
        if (c != '\n') return fail("chunked body not ended by CRLF");
        state_ = state::done;
        return true;
    case state::data:
    case state::done:
    case state::failed: break;
    }
    return fail("chunked decoder misuse");
}

}  // namespace politeproxy
