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
