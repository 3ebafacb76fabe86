#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/field.hpp"
#include "politeproxy/http1/chunked_decoder.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/beast/core/flat_buffer.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

/// Reads an HTTP/1.1 message's body from a connection a piece at a time, as its framing
/// says (a length, chunked -- decoded strictly --, or until the close), for a side that
/// does not speak HTTP/1.1: the pieces are the body's bytes alone. What the connection
/// holds past the body stays in its buffer; a chunked body's trailer fields are kept for
/// the other side (trailers()). (relay() moves a body between two HTTP/1.1 connections
/// without this step, and drops trailers.)
class body_reader {
public:
    body_reader(timed_socket& in, boost::beast::flat_buffer& buffer, body_framing body);

    struct piece {
        std::size_t size = 0;  ///< body bytes put in the room
        bool last = false;     ///< the body ended with them
        relay_status failure{relay_end::done, {}};  ///< read_failed or malformed, else done
    };

    /// The next bytes into `room`: at least one byte, or the end, or a failure. Each
    /// read waits at most `idle`.
    task<piece> next(std::span<char> room, clock::duration idle);

    bool ended() const { return ended_; }

    /// A chunked body's trailer fields, once it ended: names in lower case, without the
    /// fields a trailer must not carry (trailer_allowed). Empty otherwise.
    std::span<const field> trailers() const { return trailers_; }

private:
    timed_socket& in_;
    boost::beast::flat_buffer& buffer_;
    body_framing body_;
    std::optional<chunked_decoder> decoder_;
    std::uint64_t remaining_ = 0;  ///< of a body of known length
    bool ended_ = false;
    std::string raw_trailers_;              ///< the trailer section's lines, as the decoder kept them
    std::vector<field> trailers_;   ///< parsed from them at the end
};

/// Whether a trailer field may be forwarded: not one a trailer must not carry (framing,
/// routing, connection, content type and coding; RFC 9110 section 6.5.1). `name` in lower case.
bool trailer_allowed(std::string_view name);

/// Appends the last chunk with `trailers` (RFC 9112 section 7.1.2), less the ones not allowed.
void append_trailer_section(std::span<const field> trailers, std::string& out);

}  // namespace politeproxy
