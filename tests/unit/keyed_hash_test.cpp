// keyed_hash: SipHash against the reference's vectors, and what the key hides.
#include "politeproxy/base/keyed_hash.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace politeproxy;

namespace {
const sip_key reference_key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};  // bytes 00 01 .. 0f

std::string counting_bytes(std::size_t n) {  // 00 01 02 ...
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i));
    return s;
}
}  // namespace

TEST_CASE("SipHash-2-4 gives the reference's values (the rounds and the finish keyed_hash shares)") {
    CHECK(sip_hash<2, 4>(reference_key, "") == 0x726fdb47dd0e0e31ull);
    CHECK(sip_hash<2, 4>(reference_key, counting_bytes(15)) == 0xa129ca6149be45e5ull);  // the paper's example
}

TEST_CASE("every byte and the length count, across word boundaries") {
    std::set<std::uint64_t> seen;
    std::string s;
    for (int n = 0; n <= 40; ++n) {  // one more byte each time: 0 .. 40 bytes, some zero
        CHECK(seen.insert(sip_hash<1, 3>(reference_key, s)).second);
        s.push_back(static_cast<char>(n % 3 == 0 ? 0 : n));
    }
    const std::string a(24, 'a');
    for (std::size_t i = 0; i < a.size(); ++i) {
        std::string b = a;
        b[i] = 'b';
        CHECK(sip_hash<1, 3>(reference_key, b) != sip_hash<1, 3>(reference_key, a));
    }
}

TEST_CASE("the same bytes hash alike in one process, and the key is not the reference's") {
    CHECK(keyed_hash("example.test") == keyed_hash(std::string("example.test")));
    CHECK(keyed_hash("example.test") != keyed_hash("example.tesu"));
    CHECK(keyed_hash("example.test") != sip_hash<1, 3>(reference_key, "example.test"));
    CHECK(keyed_hash("example.test") != sip_hash<1, 3>(sip_key{}, "example.test"));
}
