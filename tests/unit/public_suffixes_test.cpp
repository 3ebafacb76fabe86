// key: domain: registrable domains from the Public Suffix List (libpsl), never hand-written.
#include "politeproxy/policy/public_suffixes.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;

TEST_CASE("a host's registrable domain is its public suffix plus one label") {
    const public_suffixes psl;
    CHECK(psl.registrable_domain("www.example.com") == "example.com");
    CHECK(psl.registrable_domain("a.b.c.example.com") == "example.com");
    CHECK(psl.registrable_domain("example.com") == "example.com");
    CHECK(psl.registrable_domain("shop.example.co.uk") == "example.co.uk");
    CHECK(psl.registrable_domain("x.user.github.io") == "user.github.io");  // a private suffix counts
    CHECK(psl.registrable_domain("a1.site.test") == "site.test");           // an unlisted TLD: one label
    CHECK(psl.registrable_domain("xn--bcher-kva.example") == "xn--bcher-kva.example");
}

TEST_CASE("addresses, bare suffixes and one-label names stay as they are") {
    const public_suffixes psl;
    CHECK(psl.registrable_domain("co.uk") == "co.uk");
    CHECK(psl.registrable_domain("localhost") == "localhost");
    CHECK(psl.registrable_domain("127.0.0.1") == "127.0.0.1");
    CHECK(psl.registrable_domain("10.1.2.3") == "10.1.2.3");
    CHECK(psl.registrable_domain("::1") == "::1");
    CHECK(psl.registrable_domain("::ffff:1.2.3.4") == "::ffff:1.2.3.4");
}
