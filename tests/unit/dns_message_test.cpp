// DNS responses built byte by byte, read as the resolver reads them: addresses with the
// smallest TTL on their way, negative answers with the SOA's, and every hostile shape of
// name, count and length refused as malformed without reading past the message.
#include "politeproxy/policy/dns_message.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

using namespace politeproxy;
using outcome = dns_reply::outcome;

namespace {

using bytes = std::vector<std::uint8_t>;

constexpr std::uint16_t type_cname = 5;
constexpr std::uint16_t type_soa = 6;
constexpr std::uint16_t type_opt = 41;
constexpr std::uint16_t class_in = 1;
constexpr std::uint16_t class_chaos = 3;

// QR, RD, RA set, and the RCODE.
constexpr std::uint16_t no_error = 0x8180;
constexpr std::uint16_t server_failure = 0x8182;
constexpr std::uint16_t name_error = 0x8183;
constexpr std::uint16_t refused = 0x8185;
constexpr std::uint16_t truncated_bit = 0x0200;
constexpr std::uint16_t response_bit = 0x8000;

// Where the question's name starts: right after the header, the usual target of pointers.
constexpr std::uint16_t question_name_at = 12;

// A name as labels, ending with the root label: "a.example" is 1 a 7 example 0.
bytes labels(std::string_view dotted) {
    bytes out;
    while (!dotted.empty()) {
        const auto dot = dotted.find('.');
        const std::string_view label = dotted.substr(0, dot);
        out.push_back(static_cast<std::uint8_t>(label.size()));
        out.insert(out.end(), label.begin(), label.end());
        dotted.remove_prefix(dot == std::string_view::npos ? dotted.size() : dot + 1);
    }
    out.push_back(0);
    return out;
}

bytes pointer_to(std::uint16_t offset) {
    return {static_cast<std::uint8_t>(0xc0 | offset >> 8), static_cast<std::uint8_t>(offset)};
}

bytes join(std::initializer_list<bytes> parts) {
    bytes out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

bytes u32_bytes(std::uint32_t v) {
    return {static_cast<std::uint8_t>(v >> 24), static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 8),
            static_cast<std::uint8_t>(v)};
}

// An SOA's RDATA: MNAME and RNAME (each as labels, or `compressed`: MNAME a pointer to the
// question's name), then SERIAL, REFRESH, RETRY, EXPIRE and MINIMUM.
bytes soa_rdata(std::uint32_t minimum, bool compressed = false) {
    return join({compressed ? pointer_to(question_name_at) : labels("ns1.example"), labels("hostmaster.example"),
                 u32_bytes(2024010101), u32_bytes(7200), u32_bytes(900), u32_bytes(1209600), u32_bytes(minimum)});
}

const bytes example_address = {93, 184, 216, 34};

// Builds a message section by section, in order; each question or record added counts in
// the header. Owners are given as labels ("www.example") or as a pointer (an offset).
class message {
public:
    enum section : std::size_t { questions = 0, answers = 1, authorities = 2, additionals = 3 };

    explicit message(std::uint16_t flags = no_error) {
        add_u16(0x1234);  // ID
        add_u16(flags);
        for (int i = 0; i < 4; ++i) add_u16(0);
    }

    message& question(std::string_view name, std::uint16_t type = dns_type_a) {
        add(labels(name));
        return question_tail(type);
    }
    message& question(std::uint16_t name_at, std::uint16_t type = dns_type_a) {
        add(pointer_to(name_at));
        return question_tail(type);
    }

    message& record(section s, std::string_view owner, std::uint16_t type, std::uint32_t ttl, const bytes& rdata,
                    std::uint16_t rclass = class_in) {
        add(labels(owner));
        return record_tail(s, type, ttl, rdata, rclass);
    }
    message& record(section s, std::uint16_t owner_at, std::uint16_t type, std::uint32_t ttl, const bytes& rdata,
                    std::uint16_t rclass = class_in) {
        add(pointer_to(owner_at));
        return record_tail(s, type, ttl, rdata, rclass);
    }

    /// Bytes as they are, counted nowhere.
    message& raw(const bytes& b) {
        add(b);
        return *this;
    }
    /// Sets a header count to what the test claims, whatever was added.
    message& claim(section s, std::uint16_t count) {
        set_u16(count_at(s), count);
        return *this;
    }

    std::size_t size() const { return wire_.size(); }
    const bytes& wire() const { return wire_; }

private:
    static std::size_t count_at(section s) { return 4 + 2 * static_cast<std::size_t>(s); }

    message& question_tail(std::uint16_t type) {
        add_u16(type);
        add_u16(class_in);
        return counted(questions);
    }
    message& record_tail(section s, std::uint16_t type, std::uint32_t ttl, const bytes& rdata, std::uint16_t rclass) {
        add_u16(type);
        add_u16(rclass);
        add(u32_bytes(ttl));
        add_u16(static_cast<std::uint16_t>(rdata.size()));
        add(rdata);
        return counted(s);
    }
    message& counted(section s) {
        const std::size_t at = count_at(s);
        set_u16(at, static_cast<std::uint16_t>((wire_[at] << 8 | wire_[at + 1]) + 1));
        return *this;
    }
    void add(const bytes& b) { wire_.insert(wire_.end(), b.begin(), b.end()); }
    void add_u16(std::uint16_t v) { add({static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v)}); }
    void set_u16(std::size_t at, std::uint16_t v) {
        wire_[at] = static_cast<std::uint8_t>(v >> 8);
        wire_[at + 1] = static_cast<std::uint8_t>(v);
    }

    bytes wire_;
};

// Read from a copy of exactly the message's size, so the sanitizers see any read past it.
dns_reply reply_of(const bytes& wire, std::uint16_t type = dns_type_a) {
    const bytes copy(wire.begin(), wire.end());
    return read_dns_reply(copy, type);
}
dns_reply reply_of(const message& m, std::uint16_t type = dns_type_a) { return reply_of(m.wire(), type); }

ip_bytes v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    return ipv4_bytes(std::uint32_t{a} << 24 | std::uint32_t{b} << 16 | std::uint32_t{c} << 8 | d);
}

bytes v6_rdata(std::uint8_t last) {
    bytes out = {0x20, 0x01, 0x0d, 0xb8};
    out.resize(16, 0);
    out[15] = last;
    return out;
}

ip_bytes v6(std::uint8_t last) {
    ip_bytes out{};
    const bytes b = v6_rdata(last);
    std::copy(b.begin(), b.end(), out.begin());
    return out;
}

// A typical A answer, owners compressed, with an EDNS OPT record in the additional section.
message a_answer() {
    message m;
    m.question("www.example", dns_type_a)
        .record(message::answers, question_name_at, dns_type_a, 300, {192, 0, 2, 1})
        .record(message::answers, question_name_at, dns_type_a, 60, {192, 0, 2, 2})
        .raw({0})  // OPT: the root name, type 41, class = UDP payload size
        .raw({0, type_opt, 0x04, 0xd0, 0, 0, 0, 0, 0, 0})
        .claim(message::additionals, 1);
    return m;
}

message name_error_with_soa(std::uint32_t soa_ttl, std::uint32_t minimum) {
    message m(name_error);
    m.question("nope.example").record(message::authorities, "example", type_soa, soa_ttl, soa_rdata(minimum));
    return m;
}

}  // namespace

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
