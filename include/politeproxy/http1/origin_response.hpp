#pragma once
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/wire_fields.hpp"

#include <boost/beast/http/basic_parser.hpp>

#include <string>
#include <string_view>

namespace politeproxy {

/// Reads an origin's response and keeps its header in the form it is forwarded in: the
/// fields the client may see, appended as they arrive to one "Name: value\r\n" block in
/// the request's arena. Hop-by-hop fields (RFC 9110 section 7.6.1: Connection,
/// Proxy-Connection, Keep-Alive, TE, Upgrade, Proxy-Authorization, Proxy-Authenticate)
/// are left out as they arrive; fields that Connection names are cut when the header is
/// complete. So a response header costs one copy and no per-field set, unlike Beast's
/// http::parser, whose field set is built, searched and walked again to forward it.
///
/// The framing fields (Transfer-Encoding, Content-Length) are never copied: they go to a
/// framing_reader, which decides the body's framing when the header is complete (a
/// refused framing fails the parse with bad_transfer_encoding or bad_content_length);
/// the forwarder writes the framing the client gets from that decision. The parser is
/// for the header only: the relay reads the body as framing() says.
class origin_response_parser : public boost::beast::http::basic_parser<false> {
public:
    explicit origin_response_parser(wire_allocator arena);

    unsigned status() const { return status_; }
    /// The Keep-Alive field's value ("timeout=5, max=100"), or empty.
    std::string_view keep_alive_hint() const { return keep_alive_; }
    /// The Retry-After field's value, or empty.
    std::string_view retry_after() const;

    /// The body's framing as the origin declared it (before bodiless statuses count).
    const body_framing& framing() const { return framing_; }
    /// Transfer codings other than chunked that the origin applied ("gzip"), lower-case.
    const std::string& other_codings() const { return framing_fields_.other_codings(); }

    /// Appends the outgoing header: "HTTP/1.1 <status> <reason>", the fields but the
    /// framing ones, then `added_fields` ("Name: value\r\n" lines, the framing among
    /// them) and the empty line.
    void write_head(std::string_view added_fields, std::string& out) const;

private:
    void on_request_impl(boost::beast::http::verb, boost::beast::string_view, boost::beast::string_view, int,
                         boost::beast::error_code&) override {}
    void on_response_impl(int code, boost::beast::string_view reason, int version, boost::beast::error_code& ec) override;
    void on_field_impl(boost::beast::http::field name, boost::beast::string_view name_string,
                       boost::beast::string_view value, boost::beast::error_code& ec) override;
    void on_header_impl(boost::beast::error_code& ec) override;
    // The body is not read through the parser (see framing()).
    void on_body_init_impl(const boost::optional<std::uint64_t>&, boost::beast::error_code&) override {}
    std::size_t on_body_impl(boost::beast::string_view, boost::beast::error_code&) override { return 0; }
    void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, boost::beast::error_code&) override {}
    std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view, boost::beast::error_code&) override {
        return 0;
    }
    void on_finish_impl(boost::beast::error_code&) override {}

    /// Removes the lines of fields_ whose name `doomed` accepts.
    template <class Pred>
    void remove_fields(Pred doomed);

    unsigned status_ = 0;
    unsigned version_ = 11;
    std::pmr::string reason_;
    std::pmr::string fields_;      ///< forwarded fields, "Name: value\r\n" each
    std::pmr::string keep_alive_;  ///< the first Keep-Alive value
    std::pmr::string connection_;  ///< every Connection value, comma separated
    std::size_t retry_after_at_ = 0, retry_after_size_ = 0;  ///< its value's place in fields_
    bool has_retry_after_ = false;
    framing_reader framing_fields_;
    body_framing framing_;
};

}  // namespace politeproxy
