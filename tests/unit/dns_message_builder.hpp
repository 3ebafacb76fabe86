#pragma once
// DNS responses built byte by byte for the parser's tests (dns_message_test.cpp): a
// message whose header counts follow the questions and records added, owner names
// written out or as compression pointers, and the shapes the tests start from.
#include "politeproxy/policy/dns_message.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy::testing::dns {

using namespace politeproxy;


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


}  // namespace politeproxy::testing::dns
