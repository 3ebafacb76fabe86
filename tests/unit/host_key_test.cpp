#include "politeproxy/host_key.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;

TEST_CASE("a host key is lower-case, without trailing dot or brackets") {
    CHECK(host_key("Example.COM") == "example.com");
    CHECK(host_key("example.com.") == "example.com");
    CHECK(host_key("[::1]") == "::1");
    CHECK(host_key("") == "");
}

TEST_CASE("patterns match exact names or strictly below a suffix") {
    CHECK(host_matches("a.example", "a.example"));
    CHECK_FALSE(host_matches("a.example", "b.a.example"));
    CHECK(host_matches("*.example", "a.example"));
    CHECK(host_matches("*.example", "b.a.example"));
    CHECK_FALSE(host_matches("*.example", "example"));
    CHECK_FALSE(host_matches("*.example", "badexample"));
}

TEST_CASE("only plain DNS names are valid host names") {
    CHECK(valid_host_name("example.com"));
    CHECK(valid_host_name("Example.COM."));
    CHECK(valid_host_name("a_b-c.test"));
    CHECK(valid_host_name("localhost"));
    CHECK_FALSE(valid_host_name(""));
    CHECK_FALSE(valid_host_name("."));
    CHECK_FALSE(valid_host_name("a..b"));
    CHECK_FALSE(valid_host_name(std::string("victim.example\0.1", 18)));
    CHECK_FALSE(valid_host_name("\xff\xfe"));
    CHECK_FALSE(valid_host_name("a b.test"));
    CHECK_FALSE(valid_host_name(std::string(64, 'a') + ".test"));
    CHECK_FALSE(valid_host_name(std::string(254, 'a')));
}
