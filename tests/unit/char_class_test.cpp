// The parsers' character classes: the word-at-a-time field value check agrees with the
// byte predicate for every byte value at every position of a word, and on random lines.
#include "politeproxy/base/char_class.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>

using namespace politeproxy;

namespace {

bool bytewise(std::string_view s) {
    for (char c : s)
        if (!is_field_value_byte(static_cast<unsigned char>(c))) return false;
    return true;
}

}  // namespace

TEST_CASE("every byte value, at every position of a word and of the tail, is judged as the byte predicate judges it") {
    for (std::size_t length : {1u, 7u, 8u, 9u, 16u, 23u}) {
        for (std::size_t at = 0; at < length; ++at) {
            for (int b = 0; b < 256; ++b) {
                std::string s(length, 'a');
                s[at] = static_cast<char>(b);
                CAPTURE(length);
                CAPTURE(at);
                CAPTURE(b);
                REQUIRE(all_field_value_bytes(s) == is_field_value_byte(static_cast<unsigned char>(b)));
            }
        }
    }
    CHECK(all_field_value_bytes(""));
    CHECK(all_field_value_bytes("text/html; charset=utf-8\t\xe2\x82\xac"));  // HTAB and obs-text are allowed
    CHECK_FALSE(all_field_value_bytes("Mon, 01 Jan 2024 00:00:00 GMT\r"));
}

TEST_CASE("random lines mixing obs-text, controls and DEL agree with the byte predicate") {
    std::minstd_rand random(7);
    const std::string alphabet = std::string("abcXYZ09 \t;=,\x7f\x01\x1f\x80\xff\xa0", 19);
    for (int n = 0; n < 20000; ++n) {
        std::string s(random() % 40, ' ');
        for (char& c : s) c = random() % 8 == 0 ? alphabet[random() % alphabet.size()] : 'v';
        REQUIRE(all_field_value_bytes(s) == bytewise(s));
    }
}
