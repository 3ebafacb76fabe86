#pragma once
// The one place where the framing of an HTTP/1.1 message is decided (RFC 9112 section
// 6.3), for client requests and origin responses alike. What is forwarded is written
// from the decision (append_framing), never copied from the sender's text. (Beast's
// parser, which reads the header first, already refuses some malformed framing on its
// own: differing or non-numeric Content-Length, chunked with Content-Length. What it
// accepts, this decides.)
#include <cstdint>
#include <string>
#include <string_view>

namespace politeproxy {

/// How a message's body is delimited.
enum class body_kind : std::uint8_t {
    none,         ///< no body
    length,       ///< exactly `length` bytes (Content-Length)
    chunked,      ///< the chunked transfer coding ends it
    until_close,  ///< it ends when the sender closes (responses only)
};

struct body_framing {
    body_kind kind = body_kind::none;
    std::uint64_t length = 0;  ///< for body_kind::length
};

/// Why a message's framing is refused.
enum class framing_fault : std::uint8_t {
    none,
    bad_transfer_encoding,  ///< not a list of codings, chunked twice or not last, (requests) no chunked
    unsupported_coding,     ///< a request coding other than chunked (501)
    bad_content_length,     ///< not digits, values that differ, or more than 64 bits
    both_framing_fields,    ///< Transfer-Encoding together with Content-Length
    transfer_encoding_in_http10,  ///< HTTP/1.0 has no transfer codings (RFC 9112 section 6.1)
};

/// Plain-text reason for a fault, for the proxy's answer.
const char* describe(framing_fault f);

/// Collects every Transfer-Encoding and Content-Length field line of one message as it
/// is parsed, then decides how the body is delimited. Holds no reference to the field
/// values. Not thread-safe; one per message.
///
/// Algorithm: Transfer-Encoding lines form one list (RFC 9110 section 5.6.1: empty
/// elements ignored, each element a token, compared case-insensitively); chunked may
/// appear once, and only last (RFC 9112 section 6.1: never applied twice; a response
/// coded on top of chunked could not be re-chunked for the client without applying it
/// twice, so it is refused too); a request must end in chunked. Content-Length lines form one list
/// of decimal numbers that must all be equal (leading zeros allowed, the value at most
/// max_content_length).
/// The largest Content-Length taken: 2^63-1, what a signed 64-bit reader (most origins) can hold.
inline constexpr std::uint64_t max_content_length = 0x7fff'ffff'ffff'ffffULL;

class framing_reader {
public:
    void transfer_encoding(std::string_view value);
    void content_length(std::string_view value);

    /// A request's body (RFC 9112 section 6.3, rules 3-6): chunked when the codings
    /// are exactly `chunked`, else its Content-Length, else none. `version` as Beast
    /// has it (10, 11).
    framing_fault request(unsigned version, body_framing& out) const;

    /// A response's body as its fields declare it, before bodiless statuses are
    /// considered (see plan_response): chunked when chunked is the final coding,
    /// until_close for other codings or no framing field at all, else its length.
    framing_fault response(unsigned version, body_framing& out) const;

    /// Whether the message had any framing field line.
    bool any() const { return has_te_ || has_cl_; }

    /// The codings other than chunked, lower-case, ", "-separated ("gzip"); empty for most.
    const std::string& other_codings() const { return codings_; }

private:
    framing_fault transfer_encoding_fault() const;

    bool has_te_ = false;
    bool te_bad_ = false;        // an element that is not a token
    unsigned chunked_ = 0;       // how many elements were chunked
    bool chunked_last_ = false;  // the last element seen was chunked
    std::string codings_;        // the other elements
    bool has_cl_ = false;
    bool cl_bad_ = false;
    std::uint64_t length_ = 0;
};

/// How an origin's response goes on to a client.
struct response_plan {
    body_framing from_origin;             ///< how its body is read: none for HEAD, 1xx, 204 and 304
    body_kind told = body_kind::none;     ///< the framing field the client gets (none: no field)
    std::uint64_t length = 0;             ///< with told == length
    bool out_chunked = false;             ///< the body is written chunked
    bool ends_at_close = false;           ///< the client learns the body's end from the close
};

/// The plan for a response whose fields declare `declared` (framing_reader::response),
/// to a request that was HEAD or not, for a client speaking `client_version` (10, 11).
/// RFC 9112 section 6.3 and RFC 9110 sections 8.6, 6.4.1: HEAD, 1xx, 204 and 304 have no
/// body; 1xx and 204 carry no framing field; HEAD and 304 keep a length or chunked as
/// declared. A body that ends at the origin's close goes chunked to an HTTP/1.1 client;
/// HTTP/1.0 has no chunked coding, so a body without a length goes raw and ends at the
/// close.
response_plan plan_response(body_framing declared, unsigned status, bool head_request, unsigned client_version);

/// Appends the framing field line for a body sent as `kind` ("Content-Length: N\r\n"
/// for length, "Transfer-Encoding: <codings, >chunked\r\n" for chunked; nothing for
/// none and until_close). `codings` are transfer codings applied before chunked.
void append_framing(body_kind kind, std::uint64_t length, std::string_view codings, std::string& out);

}  // namespace politeproxy
