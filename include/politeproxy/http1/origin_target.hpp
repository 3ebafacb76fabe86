#pragma once
#include "politeproxy/policy/address_filter.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/http1/wire_fields.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace politeproxy {

/// Where an absolute-form request target (`http://host:port/path?query`) goes.
struct origin_target {
    explicit origin_target(wire_allocator a) : path(a) {}
    std::string key;  ///< the host key (host_key()): the gate's name and what is connected to
    std::optional<ip_bytes> address;  ///< when the host is an address
    std::uint16_t port = 80;
    std::pmr::string path;  ///< origin-form: path and query, starting with "/", in the request's arena
    /// The target had neither path nor query ("http://a.test"): an OPTIONS for it goes
    /// to the origin as "OPTIONS *" (RFC 9112 section 3.2.4).
    bool no_path = false;
    /// https: reached over TLS (a request inside an intercepted CONNECT).
    bool tls = false;

    /// The Host field value sent to the origin, written from the key: "key", or
    /// "key:port" for another port than the scheme's (80, or 443 over TLS; IPv6 in
    /// brackets).
    void append_host(std::string& out) const;
};

/// Where a CONNECT goes (RFC 9110 section 9.3.6: authority-form, the port required).
struct connect_target {
    std::string key;  ///< the host key
    std::optional<ip_bytes> address;  ///< when the host is an address
    std::uint16_t port = 0;
};

/// Why a target cannot be forwarded, as the proxy answers it.
struct target_error {
    errc why;  ///< origin_form_request, bad_request, unsupported_scheme or bad_host
    const char* details;
};

/// Parses a request target as RFC 3986 and RFC 9112 section 3.2.2 have it: only http://
/// URIs with a valid host (valid_host_name, or an IP literal), no userinfo (RFC 9110
/// section 4.2.4), and a port of 1 to 65535 in digits are forwarded.
std::variant<origin_target, target_error> parse_origin_target(std::string_view target, wire_allocator arena);

/// Parses a CONNECT request target: `host:port`, the host a valid host name, an IPv4
/// address in any spelling, or an IPv6 literal in brackets; the port 1 to 65535 in
/// digits only. Nothing else (no userinfo, scheme, path or sign).
std::variant<connect_target, target_error> parse_connect_target(std::string_view authority);

/// Where a request inside an intercepted TLS connection goes: always the connection's
/// origin (`tunnel`, reached over TLS). The target is origin-form ("/path", or "*" for
/// an OPTIONS) or absolute-form "https://authority/path". The host and port it names
/// (the absolute-form authority, else the Host field; port 443 when none is written) must
/// be `expected_key` (the key of the connection's SNI, or of its CONNECT host) and the
/// tunnel's port: anything else is misdirected_request (421), as a TLS server answers a
/// request that is not for it.
std::variant<origin_target, target_error> parse_intercepted_target(std::string_view target,
                                                                   std::string_view host_field, bool is_options,
                                                                   const connect_target& tunnel,
                                                                   std::string_view expected_key,
                                                                   wire_allocator arena);

/// A port as RFC 3986 writes it (digits only), when it is 1 to 65535.
std::optional<std::uint16_t> parse_port(std::string_view digits);

namespace detail {

/// The common case read by hand: lower-case "http://", a plain name (letters, digits,
/// '-', '_', '.') with an optional port, then path and query of characters RFC 3986
/// allows outright. Anything else is nullopt, for the full parse, which gives the same
/// result for every target this accepts.
std::optional<origin_target> parse_plain_target(std::string_view target, wire_allocator arena);

/// The full parse (Boost.URL), for any target.
std::variant<origin_target, target_error> parse_any_target(std::string_view target, wire_allocator arena);

}  // namespace detail
}  // namespace politeproxy
