#include "politeproxy/policy/dns_message.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace politeproxy {

namespace {

constexpr std::size_t id_bytes = 2;
constexpr std::size_t question_tail_bytes = 4;  // QTYPE, QCLASS
constexpr std::size_t soa_counters_bytes = 16;  // SERIAL, REFRESH, RETRY, EXPIRE: the figures before MINIMUM
constexpr std::size_t a_rdata_bytes = 4;
constexpr std::size_t aaaa_rdata_bytes = 16;
// RFC 1035 section 3.1: a name's wire form, length bytes and the root label included.
constexpr std::size_t max_name_bytes = 255;

constexpr std::uint16_t flag_response = 0x8000;   // QR
constexpr std::uint16_t flag_truncated = 0x0200;  // TC
constexpr std::uint16_t rcode_bits = 0x000f;
constexpr std::uint16_t rcode_no_error = 0;
constexpr std::uint16_t rcode_name_error = 3;  // NXDOMAIN

constexpr std::uint16_t type_cname = 5;
constexpr std::uint16_t type_soa = 6;
constexpr std::uint16_t class_in = 1;

// The top two bits of a length byte: 00 a label of up to 63 bytes, 11 a compression
// pointer (RFC 1035 section 4.1.4); 01 and 10 are no label this reader knows.
constexpr std::uint8_t label_kind_bits = 0xc0;
constexpr std::uint8_t label_kind_plain = 0x00;
constexpr std::uint8_t label_kind_pointer = 0xc0;

// RFC 2181 section 8: a TTL is 31 bits; one with the top bit set is read as 0, so a
// hostile server cannot have an answer kept for 136 years.
constexpr std::uint32_t ttl_top_bit = 0x8000'0000;

std::uint32_t ttl_from(std::uint32_t raw) { return (raw & ttl_top_bit) != 0 ? 0 : raw; }

void lower_to(std::optional<std::uint32_t>& smallest, std::uint32_t ttl) {
    smallest = smallest ? std::min(*smallest, ttl) : ttl;
}

// Reads big-endian figures and names from `bytes`, never past their end. The first read
// that would go past (or a caller's fail()) makes the reader failed: every read after it
// reads nothing and gives 0, so a caller reads a whole structure and checks once.
class wire_reader {
public:
    explicit wire_reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

    bool failed() const { return failed_; }
    void fail() { failed_ = true; }
    std::size_t left() const { return bytes_.size() - at_; }

    std::span<const std::uint8_t> take(std::size_t n) {
        if (failed_ || left() < n) {
            failed_ = true;
            return {};
        }
        const auto out = bytes_.subspan(at_, n);
        at_ += n;
        return out;
    }
    void skip(std::size_t n) { take(n); }
    std::uint8_t u8() {
        const auto b = take(1);
        return b.empty() ? 0 : b[0];
    }
    std::uint16_t u16() {
        const auto b = take(2);
        return b.empty() ? 0 : static_cast<std::uint16_t>(b[0] << 8 | b[1]);
    }
    std::uint32_t u32() {
        const std::uint32_t high = u16();
        return high << 16 | u16();
    }

    void skip_name();

private:
    std::span<const std::uint8_t> bytes_;
    std::size_t at_ = 0;
    bool failed_ = false;
};

// A name ends at the root label (a zero length byte) or at a compression pointer, which
// is not followed: skipping needs only the bytes here, so a pointer to itself, or a cycle
// of pointers, ends the name like any other pointer. Each turn reads at least a byte, so
// the loop ends with the bytes.
void wire_reader::skip_name() {
    std::size_t name_bytes = 0;
    for (;;) {
        const std::uint8_t length = u8();
        const auto kind = static_cast<std::uint8_t>(length & label_kind_bits);
        if (kind == label_kind_pointer) {
            skip(1);  // the pointer's low byte
            name_bytes += 2;
        } else if (kind == label_kind_plain) {
            skip(length);
            name_bytes += 1 + std::size_t{length};
        } else {
            fail();
        }
        if (name_bytes > max_name_bytes) fail();
        if (failed_ || kind == label_kind_pointer || length == 0) return;
    }
}

struct header {
    std::uint16_t flags = 0;
    std::uint16_t questions = 0;
    std::uint16_t answers = 0;
    std::uint16_t authorities = 0;
    std::uint16_t additionals = 0;
};

header read_header(wire_reader& in) {
    header h;
    in.skip(id_bytes);  // the I/O half matches it to its query
    h.flags = in.u16();
    h.questions = in.u16();
    h.answers = in.u16();
    h.authorities = in.u16();
    h.additionals = in.u16();
    return h;
}

// A resource record's fixed fields, its RDATA a view into the message.
struct resource_record {
    std::uint16_t type = 0;
    std::uint16_t rclass = 0;
    std::uint32_t ttl = 0;  ///< RFC 2181 section 8 applied
    std::span<const std::uint8_t> rdata;
};

// RDLENGTH comes from the network: take() refuses one past the end of the message.
resource_record read_record(wire_reader& in) {
    resource_record r;
    in.skip_name();
    r.type = in.u16();
    r.rclass = in.u16();
    r.ttl = ttl_from(in.u32());
    const std::uint16_t rdlength = in.u16();
    r.rdata = in.take(rdlength);
    return r;
}

// The address in an A or AAAA record's RDATA, none when the RDATA is not its type's length.
std::optional<ip_bytes> address_in(std::span<const std::uint8_t> rdata, std::uint16_t type) {
    if (type == dns_type_a) {
        if (rdata.size() != a_rdata_bytes) return std::nullopt;
        return ipv4_bytes(std::uint32_t{rdata[0]} << 24 | std::uint32_t{rdata[1]} << 16 |
                          std::uint32_t{rdata[2]} << 8 | std::uint32_t{rdata[3]});
    }
    if (rdata.size() != aaaa_rdata_bytes) return std::nullopt;
    ip_bytes out{};
    std::copy(rdata.begin(), rdata.end(), out.begin());
    return out;
}

// RFC 2308 section 5: a negative answer may be kept for the smaller of its SOA record's
// TTL and the SOA's MINIMUM. The RDATA is MNAME, RNAME, then five 32-bit figures; its
// names are skipped within the RDATA, which holds nothing after MINIMUM. None when the
// RDATA is not that.
std::optional<std::uint32_t> negative_ttl(const resource_record& soa) {
    wire_reader rdata(soa.rdata);
    rdata.skip_name();  // MNAME
    rdata.skip_name();  // RNAME
    rdata.skip(soa_counters_bytes);
    const std::uint32_t minimum = ttl_from(rdata.u32());
    if (rdata.failed() || rdata.left() != 0) return std::nullopt;
    return std::min(soa.ttl, minimum);
}

// What the answer and authority sections say, gathered as they are read.
struct findings {
    std::vector<ip_bytes> addresses;
    std::optional<std::uint32_t> answer_ttl;    ///< the answer's addresses of the type asked and CNAMEs
    std::optional<std::uint32_t> negative_ttl;  ///< the authority's SOA records
};

void skip_questions(wire_reader& in, std::uint16_t count) {
    for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
        in.skip_name();
        in.skip(question_tail_bytes);
    }
}

// The records of the type asked are the addresses; CNAMEs lead to them (a chain the
// recursive resolver followed) and may expire first, so their TTLs bound the answer's.
void read_answer(wire_reader& in, std::uint16_t count, std::uint16_t type, findings& found) {
    for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
        const resource_record r = read_record(in);
        if (in.failed() || r.rclass != class_in) continue;
        if (r.type == type) {
            const auto address = address_in(r.rdata, type);
            if (!address) {
                in.fail();
                return;
            }
            lower_to(found.answer_ttl, r.ttl);
            if (found.addresses.size() < dns_reply_max_addresses) found.addresses.push_back(*address);
        } else if (r.type == type_cname) {
            lower_to(found.answer_ttl, r.ttl);
        }
    }
}

void read_authority(wire_reader& in, std::uint16_t count, findings& found) {
    for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
        const resource_record r = read_record(in);
        if (in.failed() || r.rclass != class_in || r.type != type_soa) continue;
        const auto ttl = negative_ttl(r);
        if (!ttl) {
            in.fail();
            return;
        }
        lower_to(found.negative_ttl, *ttl);
    }
}

// The additional section says nothing asked for here (glue, EDNS's OPT), but the header
// counts its records: they are read so that a message cut short is malformed.
void skip_records(wire_reader& in, std::uint16_t count) {
    for (std::uint32_t i = 0; i < count && !in.failed(); ++i) read_record(in);
}

dns_reply conclusion(std::uint16_t rcode, findings&& found) {
    dns_reply out;
    if (rcode == rcode_no_error && !found.addresses.empty()) {
        out.what = dns_reply::outcome::addresses;
        out.addresses = std::move(found.addresses);
        out.ttl = found.answer_ttl.value_or(0);  // always there with an address
        return out;
    }
    // NXDOMAIN is about the name whatever its answer holds (a CNAME to a name that does
    // not exist, or addresses from a confused server): no address is taken from it.
    out.what = rcode == rcode_name_error ? dns_reply::outcome::no_such_name : dns_reply::outcome::no_data;
    out.ttl = found.negative_ttl.value_or(0);
    return out;
}

}  // namespace

dns_reply read_dns_reply(std::span<const std::uint8_t> bytes, std::uint16_t type) {
    if (type != dns_type_a && type != dns_type_aaaa) return {};
    wire_reader in(bytes);
    const header head = read_header(in);
    // A truncated answer is not read as a partial one: the caller asks again over TCP.
    if (in.failed() || (head.flags & flag_response) == 0 || (head.flags & flag_truncated) != 0) return {};
    const auto rcode = static_cast<std::uint16_t>(head.flags & rcode_bits);
    if (rcode != rcode_no_error && rcode != rcode_name_error) {
        dns_reply out;
        out.what = dns_reply::outcome::server_failure;
        return out;
    }
    findings found;
    skip_questions(in, head.questions);
    read_answer(in, head.answers, type, found);
    read_authority(in, head.authorities, found);
    skip_records(in, head.additionals);
    if (in.failed()) return {};
    return conclusion(rcode, std::move(found));
}

}  // namespace politeproxy
