#include "politeproxy/policy/host_key.hpp"

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

TEST_CASE("every numeric spelling of an address is one key: its canonical text") {
    for (const char* s : {"127.0.0.1", "127.1", "127.0.1", "0x7f000001", "0X7F000001", "2130706433", "017700000001",
                          "0177.0.0.1", "0x7f.1", "0x7f.0.0.01", "127.0.0.1.", "[::ffff:127.0.0.1]", "::ffff:7f00:1",
                          "[0:0:0:0:0:ffff:7f00:1]"}) {
        CAPTURE(s);
        CHECK(host_key(s) == "127.0.0.1");
    }
    CHECK(host_key("[0:0:0:0:0:0:0:1]") == "::1");
    CHECK(host_key("[::1]") == "::1");
    CHECK(host_key("[2001:DB8:0:0:0:0:0:1]") == "2001:db8::1");
    CHECK(host_key("[64:ff9b::7f00:1]") == "64:ff9b::7f00:1");  // NAT64 is another route: its own key
    CHECK(host_key("[::127.0.0.1]") == "::127.0.0.1");
    CHECK(host_key("0") == "0.0.0.0");
    CHECK(host_key("4294967295") == "255.255.255.255");
}

TEST_CASE("what is not an address stays a name") {
    for (const char* s : {"4294967296", "256.1.1.1", "1.2.3.4.5", "08", "0x", "1..2", "0x1g", "1.2.3.256", "a.1"}) {
        CAPTURE(s);
        CHECK_FALSE(parse_host_address(s));
    }
    CHECK(host_key("1.2.3.256") == "1.2.3.256");
}

TEST_CASE("a name whose last label is numeric must be an address") {
    CHECK(valid_host_name("127.1"));
    CHECK(valid_host_name("0x7f000001"));
    CHECK(valid_host_name("2130706433"));
    CHECK(valid_host_name("1e100.net"));
    CHECK(valid_host_name("a1.b2"));
    CHECK_FALSE(valid_host_name("1.2.3.4.5"));
    CHECK_FALSE(valid_host_name("foo.123"));
    CHECK_FALSE(valid_host_name("a.0x1f"));
    CHECK_FALSE(valid_host_name("256.1.1.1"));
    CHECK_FALSE(valid_host_name("08"));
}
