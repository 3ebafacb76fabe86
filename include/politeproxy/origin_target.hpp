#pragma once
#include "politeproxy/error.hpp"
#include "politeproxy/wire_fields.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace politeproxy {

/// Where an absolute-form request target (`http://host:port/path?query`) goes: the parts
/// the forwarder needs, copied into the request's arena (the target they come from is
/// rewritten before the request goes out).
struct origin_target {
    explicit origin_target(wire_allocator a) : host(a), host_header(a), path(a) {}
    std::pmr::string host;         ///< for DNS: a name, or an address without brackets
    std::uint16_t port = 80;
    std::pmr::string host_header;  ///< the authority without userinfo
    std::pmr::string path;         ///< origin-form: path and query, starting with "/"
};

/// Why a target cannot be forwarded, as the proxy answers it.
struct target_error {
    errc why;  ///< origin_form_request, bad_request, unsupported_scheme or bad_host
    const char* details;
};

/// Parses a request target as RFC 3986 and RFC 9112 section 3.2.2 have it: only http://
/// URIs with a DNS name or an IP literal and a non-zero port are forwarded.
std::variant<origin_target, target_error> parse_origin_target(std::string_view target, wire_allocator arena);

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
