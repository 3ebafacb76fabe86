#pragma once
// Character classes the hand-written parsers share (chunk sizes, field lists, URI
// percent-escapes, numeric host spellings).

namespace politeproxy {

/// The value of a hex digit (either case), or -1.
constexpr int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Optional whitespace in HTTP (RFC 9110 section 5.6.3): SP or HTAB.
constexpr bool is_ows(unsigned char c) { return c == ' ' || c == '\t'; }

}  // namespace politeproxy
