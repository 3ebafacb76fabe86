#pragma once
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/wire_fields.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace politeproxy {

/// Reads an origin's response header and keeps it in the form it is forwarded in: the
/// fields the client may see, appended as they arrive to one "Name: value\r\n" block in
/// the request's arena. Hop-by-hop fields (RFC 9110 section 7.6.1: Connection,
/// Proxy-Connection, Keep-Alive, TE, Upgrade, Proxy-Authorization, Proxy-Authenticate)
/// are left out as they arrive; fields that Connection names are cut when the header is
/// complete. So a response header costs one pass and one copy, and no per-field set.
///
/// Strict, as a proxy must be with bytes it passes on (RFC 9112 sections 2.2, 4, 5):
/// the status line is "HTTP/1.x SP 3DIGIT SP reason" (status 100-999); every line ends
/// with CRLF (a bare CR or LF fails the header); a field name is a token followed at
/// once by ':'; a value holds no control character but HTAB, and its surrounding
/// whitespace is dropped; a line that starts with whitespace (obs-fold) fails the
/// header (RFC 9112 section 5.2: a proxy answers 502 or unfolds; it answers 502).
/// Failures are Beast's http::error codes, as the proxy's answers name them.
///
/// The framing fields (Transfer-Encoding, Content-Length) are never copied: they go to a
/// framing_reader, which decides the body's framing when the header is complete (a
/// refused framing fails the header with bad_transfer_encoding or bad_content_length);
/// the forwarder writes the framing the client gets from that decision. The parser is
/// for the header only: the relay reads the body as framing() says.
class origin_response_parser {
public:
    explicit origin_response_parser(wire_allocator arena);

    /// The most bytes the header may take, its status line and empty line included
    /// (default 8 KiB): past it, put() fails with header_limit.
    void header_limit(std::size_t bytes) { limit_ = bytes; }

    /// Takes the bytes read so far, from the first (those it did not consume come again,
    /// followed by more, as with Beast's parsers). Consumes nothing until the header is
    /// whole: then returns its size, and is_header_done(); before, 0 with need_more.
    /// Lines are checked as they complete, so a malformed one fails at once.
    std::size_t put(boost::asio::const_buffer bytes, boost::system::error_code& ec);
    /// The origin closed before the header was whole: partial_message.
    void put_eof(boost::system::error_code& ec);

    bool got_some() const { return got_some_; }
    bool is_header_done() const { return done_; }

    unsigned status() const { return status_; }
    /// Whether the origin keeps the connection open after this response, as its version
    /// and Connection field say (the body's framing is the caller's to add).
    bool keep_alive() const { return keep_alive_; }
    /// The Keep-Alive field's value ("timeout=5, max=100"), or empty.
    std::string_view keep_alive_hint() const { return keep_alive_hint_; }
    /// The Retry-After field's value, or empty.
    std::string_view retry_after() const;
    /// The first forwarded field named `lower_name` (in lower case): its value without
    /// surrounding whitespace, or empty. A scan of the fields: for the rare lookup.
    std::string_view field(std::string_view lower_name) const;

    /// The body's framing as the origin declared it (before bodiless statuses count).
    const body_framing& framing() const { return framing_; }
    /// Transfer codings other than chunked that the origin applied ("gzip"), lower-case.
    const std::string& other_codings() const { return framing_fields_.other_codings(); }

    /// The fields forwarded, "Name: value\r\n" each (no framing or hop-by-hop ones).
    std::string_view forwarded_fields() const { return fields_; }

    /// Appends the outgoing header: "HTTP/1.1 <status> <reason>", the fields but the
    /// framing ones, then `added_fields` ("Name: value\r\n" lines, the framing among
    /// them) and the empty line.
    void write_head(std::string_view added_fields, std::string& out) const;

private:
    void status_line(std::string_view line, boost::system::error_code& ec);
    /// The field line in[from, to) (its CRLF after it).
    void field_line(std::string_view in, std::size_t from, std::size_t to, boost::system::error_code& ec);
    /// Appends the run of forwarded lines copied as they came, in[run_from_, run_to_).
    void flush_run(std::string_view in);
    void header_done(boost::system::error_code& ec);

    /// Removes the lines of fields_ whose name `doomed` accepts.
    template <class Pred>
    void remove_fields(Pred doomed);

    std::size_t limit_ = 8 * 1024;
    std::size_t parsed_ = 0;  ///< bytes of whole lines checked so far
    std::size_t run_from_ = 0, run_to_ = 0;  ///< forwarded lines not yet appended to fields_
    bool got_some_ = false;
    bool done_ = false;
    unsigned status_ = 0;
    unsigned version_ = 11;
    bool keep_alive_ = false;
    std::pmr::string reason_;
    std::pmr::string fields_;           ///< forwarded fields, "Name: value\r\n" each
    std::pmr::string keep_alive_hint_;  ///< the first Keep-Alive value
    std::pmr::string connection_;       ///< every Connection value, comma separated
    std::size_t retry_after_at_ = 0, retry_after_size_ = 0;  ///< its value's place in fields_
    bool has_retry_after_ = false;
    framing_reader framing_fields_;
    body_framing framing_;
};

}  // namespace politeproxy
