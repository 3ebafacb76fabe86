#include "politeproxy/http1/request_head.hpp"

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>


namespace politeproxy {
namespace http = boost::beast::http;

namespace {

// "METHOD SP target SP HTTP/1.1"
constexpr std::size_t request_line_overhead = 2 + 8;

request_verdict refuse(errc why, const char* details) { return {refuse_entry(why, details), {}, false}; }

}  // namespace

head_refusal refuse_unparsed_head(boost::system::error_code ec, std::string_view seen, bool start_line_read,
                                  const limits_config& limits) {
    const std::string_view line = seen.substr(0, seen.find("\r\n"));
    if (ec == http::error::header_limit) {
        if (!start_line_read && seen.substr(0, limits.request_line_bytes + 2).find("\r\n") == std::string_view::npos)
            return {errc::request_line_too_long, "request line longer than limits.request_line_bytes"};
        return {errc::header_too_large, "request header section exceeds limits.request_header_bytes"};
    }
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    const std::string_view version = line.size() >= 9 ? line.substr(line.size() - 9) : std::string_view();
    if (ec == http::error::bad_version && version.starts_with(" HTTP/") && digit(version[6]) && version[7] == '.' &&
        digit(version[8]))
        return {errc::version_not_supported, "only HTTP/1.0 and HTTP/1.1 are spoken here"};
    return {errc::bad_request, "malformed request: " + ec.message()};
}

request_verdict check_request_head(const http::request_header<wire_fields>& req, const limits_config& limits,
                                   bool tunnels) {
    if (req.method_string().size() + req.target().size() + request_line_overhead > limits.request_line_bytes)
        return refuse(errc::request_line_too_long, "request line longer than limits.request_line_bytes");

    std::size_t fields = 0, hosts = 0;
    framing_reader framing;
    entry_facts facts;
    switch (req.method()) {
    case http::verb::trace: facts.method = entry_method::trace; break;
    case http::verb::connect: facts.method = entry_method::connect; break;
    case http::verb::options: facts.method = entry_method::options; break;
    default: break;
    }
    facts.asterisk = req.target() == "*";
    facts.tunnels = tunnels;
    for (const auto& f : req) {
        ++fields;
        switch (f.name()) {
        case http::field::host: ++hosts; break;
        case http::field::transfer_encoding: framing.transfer_encoding(f.value()); break;
        case http::field::content_length: framing.content_length(f.value()); break;
        case http::field::max_forwards:
            if (facts.max_forwards_fields++ == 0) facts.max_forwards = f.value();
            break;
        default: break;
        }
    }
    facts.field_lines = fields;
    // HTTP/1.1's own framing first. RFC 9112 section 3.2; a CONNECT names its authority in
    // the target, and clients differ on sending Host with it.
    if (hosts > 1 || (hosts == 0 && req.version() == 11 && req.method() != http::verb::connect))
        return refuse(errc::bad_request, "an HTTP/1.1 request needs exactly one Host field");
    request_verdict v;
    if (const auto fault = framing.request(req.version(), v.body); fault != framing_fault::none)
        return refuse(fault == framing_fault::unsupported_coding ? errc::unsupported_transfer_coding : errc::bad_framing,
                      describe(fault));
    v.framing_fields = framing.any();
    if (req.method() == http::verb::connect && v.has_body())
        return refuse(errc::bad_framing, "a CONNECT request has no body");
    // Then the rules every protocol's requests meet.
    const entry_verdict entry = judge_entry(facts, limits.request_header_fields);
    if (entry.refusal) return {entry, {}, false};
    static_cast<entry_verdict&>(v) = entry;
    return v;
}

}  // namespace politeproxy
