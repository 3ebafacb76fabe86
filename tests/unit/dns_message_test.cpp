// DNS responses built byte by byte, read as the resolver reads them: addresses with the
// smallest TTL on their way, negative answers with the SOA's, and every hostile shape of
// name, count and length refused as malformed without reading past the message.
#include "politeproxy/policy/dns_message.hpp"
#include "dns_message_builder.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace politeproxy::testing::dns;
using outcome = dns_reply::outcome;

TEST_CASE("dns: an A answer's addresses in order, with the smallest TTL") {
    const auto r = reply_of(a_answer());
    REQUIRE(r.what == outcome::addresses);
    REQUIRE(r.addresses.size() == 2);
    CHECK(r.addresses[0] == v4(192, 0, 2, 1));
    CHECK(r.addresses[1] == v4(192, 0, 2, 2));
    CHECK(r.ttl == 60);
}

TEST_CASE("dns: an AAAA answer, owners written out") {
    message m;
    m.question("www.example", dns_type_aaaa)
        .record(message::answers, "www.example", dns_type_aaaa, 120, v6_rdata(1))
        .record(message::answers, "www.example", dns_type_aaaa, 240, v6_rdata(2));
    const auto r = reply_of(m, dns_type_aaaa);
    REQUIRE(r.what == outcome::addresses);
    REQUIRE(r.addresses.size() == 2);
    CHECK(r.addresses[0] == v6(1));
    CHECK(r.addresses[1] == v6(2));
    CHECK(r.ttl == 120);
}

TEST_CASE("dns: a CNAME chain's TTLs bound the answer's") {
    message m;
    m.question("www.example")
        .record(message::answers, question_name_at, type_cname, 20, labels("cdn.example"))
        .record(message::answers, "cdn.example", type_cname, 100, labels("edge.cdn.example"))
        .record(message::answers, "edge.cdn.example", dns_type_a, 300, example_address);
    const auto r = reply_of(m);
    REQUIRE(r.what == outcome::addresses);
    REQUIRE(r.addresses.size() == 1);
    CHECK(r.addresses[0] == v4(93, 184, 216, 34));
    CHECK(r.ttl == 20);
}

TEST_CASE("dns: NXDOMAIN is kept for min(SOA TTL, MINIMUM)") {
    SUBCASE("MINIMUM the smaller") {
        const auto r = reply_of(name_error_with_soa(3600, 30));
        CHECK(r.what == outcome::no_such_name);
        CHECK(r.ttl == 30);
        CHECK(r.addresses.empty());
    }
    SUBCASE("the record's TTL the smaller") {
        const auto r = reply_of(name_error_with_soa(10, 300));
        CHECK(r.what == outcome::no_such_name);
        CHECK(r.ttl == 10);
    }
    SUBCASE("the SOA's names compressed, several SOAs: the smallest") {
        message m(name_error);
        m.question("nope.example")
            .record(message::authorities, "example", type_soa, 3600, soa_rdata(500, true))
            .record(message::authorities, question_name_at, type_soa, 3600, soa_rdata(40, true));
        const auto r = reply_of(m);
        CHECK(r.what == outcome::no_such_name);
        CHECK(r.ttl == 40);
    }
    SUBCASE("a CNAME to a name that does not exist: no address, whatever the answer holds") {
        message m(name_error);
        m.question("www.example")
            .record(message::answers, question_name_at, type_cname, 300, labels("gone.example"))
            .record(message::answers, "gone.example", dns_type_a, 300, example_address)
            .record(message::authorities, "example", type_soa, 900, soa_rdata(60));
        const auto r = reply_of(m);
        CHECK(r.what == outcome::no_such_name);
        CHECK(r.addresses.empty());
        CHECK(r.ttl == 60);
    }
}

TEST_CASE("dns: NXDOMAIN without an SOA is not kept") {
    message m(name_error);
    m.question("nope.example");
    const auto r = reply_of(m);
    CHECK(r.what == outcome::no_such_name);
    CHECK(r.ttl == 0);
}

TEST_CASE("dns: NOERROR without an address of the type asked is no data") {
    SUBCASE("an empty answer") {
        message m;
        m.question("www.example");
        const auto r = reply_of(m);
        CHECK(r.what == outcome::no_data);
        CHECK(r.ttl == 0);
    }
    SUBCASE("with an SOA in the authority section") {
        message m;
        m.question("www.example", dns_type_aaaa)
            .record(message::authorities, "example", type_soa, 3600, soa_rdata(300));
        const auto r = reply_of(m, dns_type_aaaa);
        CHECK(r.what == outcome::no_data);
        CHECK(r.ttl == 300);
    }
    SUBCASE("a CNAME alone: its TTL is not the negative one") {
        message m;
        m.question("www.example")
            .record(message::answers, question_name_at, type_cname, 5, labels("cdn.example"))
            .record(message::authorities, "example", type_soa, 3600, soa_rdata(120));
        const auto r = reply_of(m);
        CHECK(r.what == outcome::no_data);
        CHECK(r.ttl == 120);
    }
}

TEST_CASE("dns: SERVFAIL and other errors are server failures") {
    for (const std::uint16_t flags : {server_failure, refused, std::uint16_t{0x8181}, std::uint16_t{0x8184}}) {
        message m(flags);
        m.question("www.example");
        const auto r = reply_of(m);
        CHECK(r.what == outcome::server_failure);
        CHECK(r.addresses.empty());
    }
    // Read from the header alone: a failing server may send no question back.
    CHECK(reply_of(message(server_failure)).what == outcome::server_failure);
}

TEST_CASE("dns: records of the other address type, or another class, are ignored") {
    SUBCASE("A records in an answer to AAAA") {
        message m;
        m.question("www.example", dns_type_aaaa)
            .record(message::answers, question_name_at, dns_type_a, 300, example_address);
        CHECK(reply_of(m, dns_type_aaaa).what == outcome::no_data);
    }
    SUBCASE("an AAAA among A records: not an address, its TTL not counted") {
        message m;
        m.question("www.example")
            .record(message::answers, question_name_at, dns_type_aaaa, 1, v6_rdata(1))
            .record(message::answers, question_name_at, dns_type_a, 300, example_address);
        const auto r = reply_of(m);
        REQUIRE(r.addresses.size() == 1);
        CHECK(r.addresses[0] == v4(93, 184, 216, 34));
        CHECK(r.ttl == 300);
    }
    SUBCASE("an AAAA record of another length, in an answer to A") {
        message m;
        m.question("www.example")
            .record(message::answers, question_name_at, dns_type_aaaa, 300, example_address)
            .record(message::answers, question_name_at, dns_type_a, 300, example_address);
        CHECK(reply_of(m).what == outcome::addresses);
    }
    SUBCASE("class CHAOS") {
        message m;
        m.question("www.example")
            .record(message::answers, question_name_at, dns_type_a, 300, example_address, class_chaos);
        CHECK(reply_of(m).what == outcome::no_data);
    }
}

TEST_CASE("dns: a message cut anywhere is malformed, never read past") {
    const message whole[] = {a_answer(), name_error_with_soa(3600, 30)};
    for (const auto& m : whole) {
        const auto full = reply_of(m);
        REQUIRE(full.what != outcome::malformed);
        for (std::size_t cut = 0; cut < m.size(); ++cut) {
            const bytes prefix(m.wire().begin(), m.wire().begin() + static_cast<std::ptrdiff_t>(cut));
            for (const std::uint16_t type : {dns_type_a, dns_type_aaaa}) {
                CAPTURE(cut);
                const auto r = reply_of(prefix, type);
                CHECK(r.what == outcome::malformed);
                CHECK(r.addresses.empty());
            }
        }
        // Bytes after the last record change nothing.
        bytes longer = m.wire();
        longer.push_back(0xff);
        const auto r = reply_of(longer);
        CHECK(r.what == full.what);
        CHECK(r.ttl == full.ttl);
        CHECK(r.addresses == full.addresses);
    }
}

TEST_CASE("dns: compression pointers are not followed, so a loop ends the name") {
    SUBCASE("the question's name a pointer to itself") {
        message m;
        m.question(question_name_at).record(message::answers, question_name_at, dns_type_a, 300, example_address);
        const auto r = reply_of(m);
        CHECK(r.what == outcome::addresses);
        CHECK(r.ttl == 300);
    }
    SUBCASE("labels, then a pointer back into them") {
        message m;
        m.raw(join({{3, 'w', 'w', 'w'}, pointer_to(question_name_at)}))
            .raw({0, dns_type_a, 0, class_in})
            .claim(message::questions, 1)
            .record(message::answers, question_name_at, dns_type_a, 300, example_address);
        CHECK(reply_of(m).what == outcome::addresses);
    }
    SUBCASE("a pointer past the end of the message") {
        message m;
        m.question("www.example").record(message::answers, 0x3fff, dns_type_a, 300, example_address);
        CHECK(reply_of(m).what == outcome::addresses);
    }
}

TEST_CASE("dns: label types 01 and 10 are malformed") {
    for (const std::uint8_t length : {std::uint8_t{0x40}, std::uint8_t{0x41}, std::uint8_t{0x80}, std::uint8_t{0xbf}}) {
        const int first_byte = length;
        CAPTURE(first_byte);
        message in_question;
        in_question.raw({3, 'w', 'w', 'w', length, 'x', 0, 0, dns_type_a, 0, class_in}).claim(message::questions, 1);
        CHECK(reply_of(in_question).what == outcome::malformed);

        message in_answer;
        in_answer.question("www.example")
            .raw({length, 'x', 0})
            .raw({0, dns_type_a, 0, class_in, 0, 0, 1, 0, 0, 4, 192, 0, 2, 1})
            .claim(message::answers, 1);
        CHECK(reply_of(in_answer).what == outcome::malformed);
    }
}

TEST_CASE("dns: a name of at most 255 bytes") {
    const std::string l63(63, 'a');
    const std::string l61(61, 'b');
    const std::string l62(62, 'c');
    message fits;  // 3 x (1 + 63) + (1 + 61) + 1 = 255
    fits.question(l63 + "." + l63 + "." + l63 + "." + l61)
        .record(message::answers, question_name_at, dns_type_a, 1, example_address);
    CHECK(reply_of(fits).what == outcome::addresses);
    message too_long;  // 256
    too_long.question(l63 + "." + l63 + "." + l63 + "." + l62)
        .record(message::answers, question_name_at, dns_type_a, 1, example_address);
    CHECK(reply_of(too_long).what == outcome::malformed);
}

TEST_CASE("dns: lengths and counts past the end are malformed") {
    SUBCASE("RDLENGTH past the end") {
        message m;
        m.question("www.example")
            .raw(pointer_to(question_name_at))
            .raw({0, dns_type_a, 0, class_in, 0, 0, 1, 0, 0, 8, 192, 0, 2, 1})  // RDLENGTH 8, 4 bytes follow
            .claim(message::answers, 1);
        CHECK(reply_of(m).what == outcome::malformed);
    }
    SUBCASE("an A record's RDLENGTH not 4, an AAAA's not 16") {
        message a;
        a.question("www.example").record(message::answers, question_name_at, dns_type_a, 300, {192, 0, 2, 1, 0});
        CHECK(reply_of(a).what == outcome::malformed);
        message aaaa;
        aaaa.question("www.example", dns_type_aaaa)
            .record(message::answers, question_name_at, dns_type_aaaa, 300, example_address);
        CHECK(reply_of(aaaa, dns_type_aaaa).what == outcome::malformed);
    }
    SUBCASE("more answers counted than sent") {
        message m = a_answer();
        m.claim(message::answers, 3);
        CHECK(reply_of(m).what == outcome::malformed);
        m.claim(message::answers, 0xffff);
        CHECK(reply_of(m).what == outcome::malformed);
    }
    SUBCASE("an SOA's name running past its RDATA, though not past the message") {
        message m(name_error);
        m.question("nope.example")
            .record(message::authorities, "example", type_soa, 3600, {5, 'a', 'b'})
            .record(message::additionals, "ns1.example", dns_type_a, 3600, example_address);
        CHECK(reply_of(m).what == outcome::malformed);
    }
    SUBCASE("an SOA's RDATA with a byte after MINIMUM, or one short") {
        bytes longer = soa_rdata(30);
        longer.push_back(0);
        message m(name_error);
        m.question("nope.example").record(message::authorities, "example", type_soa, 3600, longer);
        CHECK(reply_of(m).what == outcome::malformed);
        bytes shorter = soa_rdata(30);
        shorter.pop_back();
        message n(name_error);
        n.question("nope.example").record(message::authorities, "example", type_soa, 3600, shorter);
        CHECK(reply_of(n).what == outcome::malformed);
    }
}

TEST_CASE("dns: not a whole response") {
    CHECK(reply_of(bytes{}).what == outcome::malformed);
    CHECK(reply_of(bytes(11, 0x81)).what == outcome::malformed);
    SUBCASE("QR clear: a query") {
        message m(no_error & ~response_bit);
        m.question("www.example").record(message::answers, question_name_at, dns_type_a, 300, example_address);
        CHECK(reply_of(m).what == outcome::malformed);
    }
    SUBCASE("TC set: to be asked again over TCP") {
        message m(no_error | truncated_bit);
        m.question("www.example").record(message::answers, question_name_at, dns_type_a, 300, example_address);
        CHECK(reply_of(m).what == outcome::malformed);
    }
    SUBCASE("a query type other than A or AAAA") {
        CHECK(reply_of(a_answer(), type_cname).what == outcome::malformed);
    }
}

TEST_CASE("dns: a TTL with its top bit set is 0") {
    message m;
    m.question("www.example")
        .record(message::answers, question_name_at, dns_type_a, 300, {192, 0, 2, 1})
        .record(message::answers, question_name_at, dns_type_a, 0x8000'0001, {192, 0, 2, 2});
    const auto r = reply_of(m);
    CHECK(r.what == outcome::addresses);
    CHECK(r.addresses.size() == 2);
    CHECK(r.ttl == 0);

    // So is an SOA's MINIMUM, and the SOA record's own TTL.
    CHECK(reply_of(name_error_with_soa(3600, 0xffff'ffff)).ttl == 0);
    CHECK(reply_of(name_error_with_soa(0x8000'0000, 60)).ttl == 0);
    // The largest TTL there is stays.
    CHECK(reply_of(name_error_with_soa(0x7fff'ffff, 0x7fff'ffff)).ttl == 0x7fff'ffff);
}

TEST_CASE("dns: no more than 64 addresses are kept") {
    message m;
    m.question("www.example");
    for (int i = 0; i < 100; ++i)
        m.record(message::answers, question_name_at, dns_type_a, static_cast<std::uint32_t>(1000 - i),
                 {10, 0, 0, static_cast<std::uint8_t>(i)});
    const auto r = reply_of(m);
    REQUIRE(r.what == outcome::addresses);
    REQUIRE(r.addresses.size() == dns_reply_max_addresses);
    CHECK(r.addresses.front() == v4(10, 0, 0, 0));
    CHECK(r.addresses.back() == v4(10, 0, 0, 63));
    CHECK(r.ttl == 901);  // the records past the 64th still bound the TTL
}
