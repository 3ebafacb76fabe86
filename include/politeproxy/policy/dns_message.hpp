#pragma once
// A DNS response (RFC 1035 section 4), sans-io: what it says about the name asked for,
// with how long that may be believed. The resolver's I/O half sends the query, matches the
// response's ID and question to it, and caches what this reads for the TTL read here.
#include "politeproxy/policy/address_filter.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace politeproxy {

/// The query types read_dns_reply() answers for.
inline constexpr std::uint16_t dns_type_a = 1;
inline constexpr std::uint16_t dns_type_aaaa = 28;

/// The most addresses one reply keeps; a response with more has the rest dropped.
inline constexpr std::size_t dns_reply_max_addresses = 64;

/// What one DNS response says about the name asked for, for one query type (A or AAAA).
struct dns_reply {
    enum class outcome : std::uint8_t {
        addresses,       ///< at least one address of the type asked for
        no_such_name,    ///< NXDOMAIN (RCODE 3): the name does not exist, for any type
        no_data,         ///< NOERROR, but no address of the type asked for (RFC 2308 NODATA)
        server_failure,  ///< SERVFAIL, REFUSED, NOTIMP or any other error RCODE
        malformed,       ///< not a whole, readable response: try again or elsewhere, cache nothing
    };
    outcome what = outcome::malformed;
    /// In the order of the answer section (A as IPv4-mapped); empty unless `what` is addresses.
    std::vector<ip_bytes> addresses;
    /// Seconds. addresses: the smallest TTL of the answer's A/AAAA and CNAME records.
    /// no_such_name, no_data: RFC 2308 section 5, the smallest min(TTL, MINIMUM) of the
    /// authority section's SOA records, 0 if it has none. Otherwise 0.
    std::uint32_t ttl = 0;
};

/// Reads a response to a query of `type` (dns_type_a or dns_type_aaaa; any other type
/// gives malformed). `bytes` are the message as received (over TCP: without its length
/// prefix), every one of them untrusted.
///
/// The response must be whole: the header's QR bit set, TC clear (a truncated UDP answer
/// is to be asked again over TCP), and every question and record the header counts
/// present and readable, else malformed. Bytes after the last record are ignored. An
/// error RCODE other than NXDOMAIN gives server_failure without reading further.
/// Only class IN records count. The answer section's records of `type` are the addresses
/// (A needs RDLENGTH 4, AAAA 16, else malformed); records of the other address type are
/// ignored, CNAME records count towards the TTL only. Owner names are not compared with
/// the question: every address in the answer is taken, as a stub resolver takes what its
/// recursive resolver followed. A TTL or SOA MINIMUM with its top bit set is 0 (RFC 2181
/// section 8). Addresses past dns_reply_max_addresses are dropped (their TTLs still count).
///
/// Names are skipped, never decompressed: a compression pointer ends the name it is in
/// and is not followed, so pointer loops cost nothing. A name is malformed when a length
/// byte's top bits are 01 or 10 (RFC 2671's extended labels, deprecated by RFC 6891, and
/// a reserved type: no label is longer than 63 bytes), its own bytes exceed 255, or it
/// runs past the end of the message (or, inside an SOA's RDATA, past the RDATA).
///
/// Work is linear in `bytes.size()` whatever the counts say; no recursion, no exceptions,
/// nothing allocated but `addresses`.
dns_reply read_dns_reply(std::span<const std::uint8_t> bytes, std::uint16_t type);

}  // namespace politeproxy
