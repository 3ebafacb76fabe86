#include "politeproxy/base/error.hpp"

namespace politeproxy {
namespace {

class category final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "politeproxy"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::queue_full: return "host queue is full";
        case errc::queue_timeout: return "waited longer than queue.max_wait";
        case errc::shutting_down: return "the proxy is shutting down";
        case errc::cancelled: return "cancelled while queued";
        case errc::bad_request: return "malformed request";
        case errc::bad_host: return "invalid host in the request target";
        case errc::header_too_large: return "request header section too large";
        case errc::request_line_too_long: return "request line too long";
        case errc::bad_framing: return "bad request body framing";
        case errc::unsupported_transfer_coding: return "transfer coding not implemented";
        case errc::version_not_supported: return "HTTP version not supported";
        case errc::method_not_allowed: return "method not allowed";
        case errc::request_timeout: return "the client stopped sending its request";
        case errc::unsupported_scheme: return "unsupported scheme";
        case errc::origin_form_request: return "origin-form request sent to a proxy";
        case errc::client_denied: return "client address not allowed";
        case errc::proxy_auth_required: return "proxy authentication required";
        case errc::auth_checks_busy: return "too many credentials waiting to be checked";
        case errc::parked_full: return "limits.max_parked requests are parked across all hosts";
        case errc::client_connections_full: return "limits.max_client_connections client connections are open";
        case errc::origin_refused_by_parent: return "the parent proxy could not reach the origin";
        case errc::parent_credentials_refused: return "the parent proxy refused this proxy's credentials";
        case errc::parent_refused: return "the parent proxy refused the tunnel";
        case errc::parents_down: return "every parent proxy of the route is down";
        case errc::robots_disallowed: return "disallowed by the origin's robots.txt";
        case errc::robots_unreachable: return "the origin's robots.txt could not be read";
        case errc::client_queue_full: return "this client has clients.max_waiting requests waiting across all hosts";
        case errc::destination_denied: return "destination address denied";
        case errc::connect_port_denied: return "CONNECT port not allowed";
        case errc::loop_detected: return "forwarding loop detected";
        case errc::dns_failure: return "origin name did not resolve";
        case errc::dns_timeout: return "origin name look-up timed out";
        case errc::origin_refused: return "origin refused the connection";
        case errc::origin_closed: return "origin closed the connection";
        case errc::origin_connect_timeout: return "connecting to the origin timed out";
        case errc::origin_response_timeout: return "no response headers in time";
        case errc::origin_bad_response: return "origin sent a malformed response";
        case errc::tls_certificate_error: return "the origin's TLS certificate did not verify";
        case errc::tls_protocol_error: return "TLS handshake with the origin failed";
        case errc::misdirected_request: return "the request names another host than this TLS connection's";
        case errc::fleet_unavailable: return "the fleet store is unreachable";
        }
        return "unknown politeproxy error";
    }
};

}  // namespace

const boost::system::error_category& politeproxy_category() noexcept {
    static const category instance;
    return instance;
}

}  // namespace politeproxy
