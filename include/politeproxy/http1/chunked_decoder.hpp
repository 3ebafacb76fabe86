#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace politeproxy {

/// Decodes the chunked transfer coding (RFC 9112 section 7.1) strictly, one byte of
/// framing at a time and chunk data in spans, so input may arrive split anywhere.
/// Sans-io: bytes in, body bytes out; no allocation.
///
/// Refused (failed(), with a reason): a chunk size that is not hex digits, or over 64 bits;
/// anything but `;` extensions between the size and its CRLF (whitespace only before
/// `;`, as BWS); a bare CR or bare LF anywhere a CRLF belongs; chunk data not followed
/// by CRLF; a chunk line longer than max_line_bytes; trailer fields that are not
/// `name: value` lines, or longer together than max_trailer_bytes. Extensions and
/// trailer fields are checked and dropped: what is forwarded is re-chunked from the
/// data alone.
class chunked_decoder {
public:
    static constexpr std::size_t max_line_bytes = 4096;
    static constexpr std::size_t max_trailer_bytes = 16 * 1024;

    struct result {
        std::size_t consumed = 0;  ///< input bytes used
        std::size_t written = 0;   ///< body bytes copied into the room
    };

    /// Consumes `input` until it is used up, `room` is full, the message ends or the
    /// coding is found broken; copies the chunk data into `room`. Bytes after the end
    /// of the message are left unconsumed.
    result decode(std::string_view input, std::span<char> room);

    /// From now on, the trailer section's field lines (each ending in CRLF, as checked)
    /// are appended to `out`; by default they are checked and dropped.
    void keep_trailers(std::string& out) { trailers_out_ = &out; }

    bool done() const { return state_ == state::done; }
    bool failed() const { return state_ == state::failed; }
    /// Why it failed (static text).
    const char* error() const { return error_; }

private:
    enum class state : std::uint8_t {
        size_start, size, size_bws, ext_name_start, ext_name, ext_after_name, ext_value_start, ext_token,
        ext_quoted, ext_quoted_pair, ext_after_value, size_lf, data, data_cr, data_lf,
        trailer_start, trailer_name, trailer_value, trailer_lf, final_lf, done, failed,
    };

    /// Advances the framing state by one byte; false when the byte is refused.
    bool step(unsigned char c);
    bool fail(const char* why);

    state state_ = state::size_start;
    std::uint64_t remaining_ = 0;  // data bytes left in the current chunk
    unsigned digits_ = 0;
    std::size_t line_ = 0;     // bytes of the current chunk line
    std::size_t trailer_ = 0;  // bytes of the trailer section
    std::string* trailers_out_ = nullptr;  // see keep_trailers()
    const char* error_ = nullptr;
};

}  // namespace politeproxy
