// keyed_hash: SipHash against the reference's vectors, and what the key hides.
#include "politeproxy/base/keyed_hash.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>

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

TEST_CASE("a chained table under keyed_string_hash: names chosen for one bucket spread out") {
    // 1000 names that std::hash (a fixed seed: anyone can search offline) puts in bucket 0
    // of a table of at least 4096 buckets; a lookup among them walks the bucket's chain.
    std::unordered_map<std::string, int, keyed_string_hash, std::equal_to<>> keyed;
    keyed.reserve(4096);
    std::unordered_map<std::string, int> unkeyed;
    unkeyed.reserve(4096);
    REQUIRE(keyed.bucket_count() == unkeyed.bucket_count());
    const std::size_t buckets = keyed.bucket_count();
    for (std::uint64_t i = 0; keyed.size() < 1000; ++i) {
        std::string name = "n" + std::to_string(i) + ".flood.test";
        if (std::hash<std::string>{}(name) % buckets != 0) continue;
        unkeyed.emplace(name, 0);
        keyed.emplace(std::move(name), 0);
    }
    REQUIRE(keyed.bucket_count() == buckets);  // no rehash: 1000 of at least 4096
    std::size_t longest = 0, longest_unkeyed = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
        longest = std::max(longest, keyed.bucket_size(b));
        longest_unkeyed = std::max(longest_unkeyed, unkeyed.bucket_size(b));
    }
    CHECK(longest_unkeyed == 1000);  // what the names were chosen for
    CHECK(longest <= 8);             // random names: 1000 in 4096+ buckets, rarely over 5
    CHECK(keyed.find(std::string_view("n0.flood.test")) == keyed.find("n0.flood.test"));  // transparent
}
