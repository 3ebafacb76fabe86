#include "politeproxy/policy/address_filter.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;

namespace {
address_filter filter(std::initializer_list<const char*> deny, std::initializer_list<const char*> allow = {}) {
    address_filter f;
    for (auto d : deny) REQUIRE_FALSE(address_filter::expand(d, f.deny));
    for (auto a : allow) REQUIRE_FALSE(address_filter::expand(a, f.allow));
    return f;
}
bool ok(const address_filter& f, const char* ip) { return f.permitted(*parse_ip(ip)); }
}  // namespace

TEST_CASE("the default classes deny private, loopback and link-local addresses") {
    const auto f = filter({"private", "loopback", "link_local"});
    for (auto ip : {"10.0.0.1", "172.16.5.5", "172.31.255.255", "192.168.0.1", "100.64.0.1", "fd00::1", "127.0.0.1",
                    "127.9.9.9", "0.0.0.0", "::1", "::", "169.254.169.254", "fe80::1", "::ffff:127.0.0.1",
                    "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "198.18.0.1"})
        CHECK_MESSAGE(!ok(f, ip), ip);
    for (auto ip : {"93.184.216.34", "172.32.0.1", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808"})
        CHECK_MESSAGE(ok(f, ip), ip);
}

TEST_CASE("the default classes deny every special-purpose range that is not globally reachable") {
    const auto f = filter({"private", "loopback", "link_local"});
    for (auto ip : {"224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "192.0.2.1", "198.51.100.1",
                    "203.0.113.1", "192.88.99.1", "192.0.0.8", "ff02::1", "ff0e::1", "2001:db8::1", "3fff::1",
                    "100::1", "::127.0.0.1", "::a00:1", "64:ff9b:1::1", "2001::1", "2001:2::1", "5f00::1", "fec0::1",
                    "64:ff9b::a00:1", "2002:a00:1::1", "2002:7f00:1::1", "2002:a9fe:a9fe::1", "::ffff:224.0.0.1"})
        CHECK_MESSAGE(!ok(f, ip), ip);
    // Globally reachable parts of wider ranges, and the public addresses they carry.
    for (auto ip : {"192.0.0.9", "192.0.0.10", "2001:4:112::1", "2001:20::1", "2001:3::1", "2002:808:808::1",
                    "64:ff9b::808:808", "::ffff:8.8.8.8", "2a00:1450::1"})
        CHECK_MESSAGE(ok(f, ip), ip);
}

TEST_CASE("a class's holes open only that class's ranges, never an entry given as a network") {
    CHECK(ok(filter({"private"}), "192.0.0.9"));
    CHECK_FALSE(ok(filter({"private", "192.0.0.9/32"}), "192.0.0.9"));
    CHECK(ok(filter({"private"}), "2001:20::1"));
    CHECK_FALSE(ok(filter({"private", "2001::/16"}), "2001:20::1"));  // wider than the hole, still whole
}

TEST_CASE("allow entries punch holes in the deny list") {
    const auto f = filter({"loopback"}, {"127.0.0.0/8"});
    CHECK(ok(f, "127.0.0.1"));
    CHECK(ok(f, "::ffff:127.0.0.1"));
    CHECK_FALSE(ok(f, "::1"));
    // :: and ::1 are not IPv4-compatible addresses (RFC 4291): an allowed ::1 carries nothing.
    CHECK(ok(filter({"private", "loopback"}, {"::1/128"}), "::1"));
    // The IPv4-compatible form is another address, in a denied range of its own.
    CHECK_FALSE(ok(filter({"private", "loopback"}, {"127.0.0.0/8"}), "::127.0.0.1"));
}

TEST_CASE("networks parse strictly") {
    CHECK(parse_network("10.0.0.0/8"));
    CHECK(parse_network("::1"));
    CHECK_FALSE(parse_network("10.0.0.0/33"));
    CHECK_FALSE(parse_network("10.0.0/8"));
    CHECK_FALSE(parse_network("example.com"));
    CHECK(parse_network("10.1.2.3/32")->contains(*parse_ip("10.1.2.3")));
    CHECK_FALSE(parse_network("10.1.2.3/32")->contains(*parse_ip("10.1.2.4")));
}

TEST_CASE("the proxy's own listeners are never a destination, however the address is spelled") {
    own_listeners own;
    own.bound.push_back({*parse_ip("127.0.0.1"), 9464, false});  // admin on loopback
    own.bound.push_back({*parse_ip("::"), 3128, true});          // proxy on every address
    own.local.push_back(*parse_ip("192.0.2.7"));
    CHECK(own.contains(*parse_ip("127.0.0.1"), 9464));
    CHECK(own.contains(*parse_ip("::ffff:127.0.0.1"), 9464));  // the IPv4-mapped spelling is the same bytes
    CHECK(own.contains(*parse_ip("0.0.0.0"), 9464));           // connects to this host
    CHECK(own.contains(*parse_ip("::"), 9464));
    CHECK_FALSE(own.contains(*parse_ip("127.0.0.2"), 9464));   // another loopback address: another socket
    CHECK_FALSE(own.contains(*parse_ip("127.0.0.1"), 9465));
    CHECK(own.contains(*parse_ip("127.0.0.2"), 3128));         // bound to any: every loopback address
    CHECK(own.contains(*parse_ip("::1"), 3128));
    CHECK(own.contains(*parse_ip("192.0.2.7"), 3128));         // and the host's own
    CHECK_FALSE(own.contains(*parse_ip("192.0.2.8"), 3128));
}
