#include "politeproxy/http1/answers.hpp"

#include "politeproxy/http1/request_head.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/http/status.hpp>

#include <charconv>


namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

struct answer_kind {
    http::status status;
    const char* proxy_error;  ///< RFC 9209 error type
};

answer_kind kind_of(errc why) {
    switch (why) {
    case errc::queue_full:
    case errc::queue_timeout:
    case errc::parked_full:
    case errc::client_queue_full:
    case errc::client_connections_full: return {http::status::service_unavailable, "connection_limit_reached"};
    case errc::shutting_down: return {http::status::service_unavailable, "proxy_internal_response"};
    case errc::fleet_unavailable: return {http::status::service_unavailable, "proxy_internal_error"};
    case errc::auth_checks_busy: return {http::status::service_unavailable, "proxy_internal_response"};
    case errc::client_denied:
    case errc::connect_port_denied: return {http::status::forbidden, "http_request_denied"};
    case errc::proxy_auth_required: return {http::status::proxy_authentication_required, "http_request_denied"};
    case errc::destination_denied: return {http::status::forbidden, "destination_ip_prohibited"};
    case errc::robots_disallowed: return {http::status::forbidden, "http_request_denied"};
    case errc::robots_unreachable: return {http::status::service_unavailable, "destination_unavailable"};
    case errc::header_too_large: return {http::status::request_header_fields_too_large, "http_request_error"};
    case errc::request_line_too_long: return {http::status::uri_too_long, "http_request_error"};
    case errc::unsupported_transfer_coding: return {http::status::not_implemented, "http_request_error"};
    case errc::version_not_supported: return {http::status::http_version_not_supported, "http_request_error"};
    case errc::method_not_allowed: return {http::status::method_not_allowed, "http_request_denied"};
    case errc::request_timeout: return {http::status::request_timeout, "http_request_error"};
    case errc::loop_detected: return {http::status::loop_detected, "proxy_loop_detected"};
    case errc::dns_failure: return {http::status::bad_gateway, "dns_error"};
    case errc::dns_timeout: return {http::status::gateway_timeout, "dns_timeout"};
    case errc::origin_refused: return {http::status::bad_gateway, "connection_refused"};
    case errc::origin_refused_by_parent: return {http::status::bad_gateway, "destination_unavailable"};
    case errc::parent_credentials_refused: return {http::status::bad_gateway, "proxy_configuration_error"};
    case errc::parent_refused: return {http::status::bad_gateway, "destination_unavailable"};
    case errc::parents_down: return {http::status::bad_gateway, "connection_refused"};
    case errc::origin_closed: return {http::status::bad_gateway, "connection_terminated"};
    case errc::origin_connect_timeout: return {http::status::gateway_timeout, "connection_timeout"};
    case errc::origin_response_timeout: return {http::status::gateway_timeout, "http_response_timeout"};
    case errc::origin_bad_response: return {http::status::bad_gateway, "http_protocol_error"};
    case errc::tls_certificate_error: return {http::status::bad_gateway, "tls_certificate_error"};
    case errc::tls_protocol_error: return {http::status::bad_gateway, "tls_protocol_error"};
    case errc::misdirected_request: return {http::status::misdirected_request, "http_request_denied"};
    case errc::bad_request:
    case errc::bad_framing:
    case errc::bad_host:
    case errc::unsupported_scheme:
    case errc::origin_form_request:
    case errc::cancelled: break;
    }
    return {http::status::bad_request, "http_request_error"};
}

std::string quoted(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c >= 0x20 && c < 0x7f) out += c;
    }
    return out + "\"";
}

}  // namespace

answer make_answer(errc why, std::string_view details, bool keep_alive,
                   std::optional<clock::duration> retry_after, std::string_view next_hop) {
    const answer_kind kind = kind_of(why);
    answer res{kind.status, 11};
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.set(http::field::cache_control, "no-store");
    res.set("Proxy-Status", std::string("politeproxy; error=") + kind.proxy_error + "; details=" + quoted(details) +
                                (next_hop.empty() ? std::string() : "; next-hop=" + quoted(next_hop)));
    if (retry_after) {
        const auto seconds = std::chrono::ceil<std::chrono::seconds>(*retry_after).count();
        res.set(http::field::retry_after, std::to_string(seconds < 1 ? 1 : seconds));
    }
    res.body() = std::to_string(static_cast<unsigned>(kind.status)) + " " +
                 std::string(http::obsolete_reason(kind.status)) + ": " + std::string(details) + "\n";
    if (why == errc::method_not_allowed) res.set(http::field::allow, forwarded_methods);
    if (why == errc::proxy_auth_required) res.set(http::field::proxy_authenticate, "Basic realm=\"politeproxy\"");
    res.keep_alive(keep_alive);
    res.prepare_payload();
    return res;
}

answer make_options_answer(bool keep_alive) {
    answer res{http::status::ok, 11};
    res.set(http::field::allow, forwarded_methods);
    res.set("Proxy-Status", "politeproxy; details=\"OPTIONS answered by the proxy\"");
    res.keep_alive(keep_alive);
    res.prepare_payload();
    return res;
}

}  // namespace politeproxy
