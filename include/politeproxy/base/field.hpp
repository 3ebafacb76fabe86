#pragma once
#include <cstddef>
#include <string>

namespace politeproxy {

/// A header or trailer field, as every protocol of the proxy hands it on: HTTP/1.1's
/// bodies (trailers) and HTTP/2's streams share this type, so neither protocol's code
/// includes the other's for it. HTTP/2 names are lowercase (nghttp2 checks them).
struct field {
    std::string name;
    std::string value;
};

/// Room made for a header's fields before they are added: a typical request's or
/// response's fit, so the list is not regrown (its strings moved) field by field.
inline constexpr std::size_t typical_field_count = 16;

}  // namespace politeproxy
