#include "politeproxy/http1/request_head.hpp"

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include <charconv>

namespace politeproxy {
namespace http = boost::beast::http;

namespace {

// "METHOD SP target SP HTTP/1.1"
constexpr std::size_t request_line_overhead = 2 + 8;

request_verdict refuse(errc why, const char* details) {
    request_verdict v;
    v.refusal = why;
    v.details = details;
    return v;
}

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

request_verdict check_request_head(const http::request_header<wire_fields>& req, const limits_config& limits) {
    if (req.method_string().size() + req.target().size() + request_line_overhead > limits.request_line_bytes)
        return refuse(errc::request_line_too_long, "request line longer than limits.request_line_bytes");

    std::size_t fields = 0, hosts = 0;
    framing_reader framing;
    std::string_view max_forwards;
    bool has_max_forwards = false;
    for (const auto& f : req) {
        ++fields;
        switch (f.name()) {
        case http::field::host: ++hosts; break;
        case http::field::transfer_encoding: framing.transfer_encoding(f.value()); break;
        case http::field::content_length: framing.content_length(f.value()); break;
        case http::field::max_forwards:
            if (has_max_forwards && req.method() == http::verb::options)
                return refuse(errc::bad_request, "Max-Forwards twice");
            has_max_forwards = true;
            max_forwards = f.value();
            break;
        default: break;
        }
    }
    if (fields > limits.request_header_fields)
        return refuse(errc::header_too_large, "more header fields than limits.request_header_fields");
    // RFC 9112 section 3.2; a CONNECT names its authority in the target, and clients
    // differ on sending Host with it.
    if (hosts > 1 || (hosts == 0 && req.version() == 11 && req.method() != http::verb::connect))
        return refuse(errc::bad_request, "an HTTP/1.1 request needs exactly one Host field");
    if (req.method() == http::verb::trace) return refuse(errc::method_not_allowed, "TRACE is not forwarded");

    request_verdict v;
    if (const auto fault = framing.request(req.version(), v.body); fault != framing_fault::none)
        return refuse(fault == framing_fault::unsupported_coding ? errc::unsupported_transfer_coding : errc::bad_framing,
                      describe(fault));
    v.framing_fields = framing.any();
    if (req.method() == http::verb::connect && v.has_body())
        return refuse(errc::bad_framing, "a CONNECT request has no body");
    // OPTIONS * (RFC 9112 section 3.2.4) addresses the proxy itself.
    if (req.method() == http::verb::options && req.target() == "*") v.answer_options = true;
    if (has_max_forwards && req.method() == http::verb::options)
        if (const char* fault = apply_max_forwards(max_forwards, v)) return refuse(errc::bad_request, fault);
    return v;
}

const char* apply_max_forwards(std::string_view value, request_verdict& v) {
    long long n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || end != value.data() + value.size() || n < 0)
        return "Max-Forwards is not a non-negative number";
    v.answer_options = v.answer_options || n == 0;
    v.max_forwards = n - 1;
    return nullptr;
}

}  // namespace politeproxy
