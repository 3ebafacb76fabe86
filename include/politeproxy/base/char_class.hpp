#pragma once
// Character classes the hand-written parsers share (chunk sizes, field lists, field
// lines, URI percent-escapes, numeric host spellings).

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace politeproxy {

namespace detail {
constexpr std::array<bool, 256> tchars = [] {
    std::array<bool, 256> ok{};
    for (unsigned char c = 'a'; c <= 'z'; ++c) ok[c] = true;
    for (unsigned char c = 'A'; c <= 'Z'; ++c) ok[c] = true;
    for (unsigned char c = '0'; c <= '9'; ++c) ok[c] = true;
    for (unsigned char c : std::string_view("!#$%&'*+-.^_`|~")) ok[c] = true;
    return ok;
}();
}  // namespace detail

/// A tchar (RFC 9110 section 5.6.2): the bytes of a token, such as a field name.
constexpr bool is_tchar(unsigned char c) { return detail::tchars[c]; }

/// A byte a field value may hold (RFC 9110 section 5.5): VCHAR, obs-text, SP or HTAB;
/// not NUL, CR, LF, any other control character or DEL.
constexpr bool is_field_value_byte(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

/// Whether every byte of `s` is a field value byte. Every field line of every response
/// passes here, so it looks at eight bytes at once: a word with no byte below 0x20 and
/// none equal to DEL passes whole (the bit tricks flag any such byte, sometimes one too
/// many); a flagged word, HTAB in it for instance, is looked at byte by byte.
inline bool all_field_value_bytes(std::string_view s) {
    const auto word_passes = [](const char* at) {
        constexpr std::uint64_t ones = 0x0101010101010101, highs = 0x8080808080808080;
        std::uint64_t w;
        std::memcpy(&w, at, sizeof w);
        const std::uint64_t below_space = (w - ones * 0x20) & ~w & highs;
        const std::uint64_t del = w ^ (ones * 0x7f);
        return ((del - ones) & ~del & highs) == 0 && below_space == 0;
    };
    const auto bytes_pass = [](const char* at, std::size_t n) {
        for (std::size_t j = 0; j < n; ++j)
            if (!is_field_value_byte(static_cast<unsigned char>(at[j]))) return false;
        return true;
    };
    if (s.size() < 8) return bytes_pass(s.data(), s.size());
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8)
        if (!word_passes(s.data() + i) && !bytes_pass(s.data() + i, 8)) return false;
    // The last bytes as one word ending where s ends (overlapping the previous one).
    const char* last = s.data() + s.size() - 8;
    return i == s.size() || word_passes(last) || bytes_pass(last, 8);
}

/// `s` with ASCII letters in lower case (an HTTP/2 field name from an HTTP/1.1 one).
inline std::string lower_case(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

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
