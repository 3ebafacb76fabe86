// DNS responses, as hostile bytes: any message read as an answer to A or to AAAA gives an
// outcome, never a crash or a read past the message; addresses only with the outcome
// that has them, never more than the cap; a TTL of 31 bits, and none with no answer to
// keep; the same answer twice; a server failure read from the header alone, whatever the
// type asked.
#include "fuzz_input.hpp"

#include "politeproxy/policy/dns_message.hpp"

#include <initializer_list>
#include <span>

using namespace politeproxy;

namespace {

constexpr std::uint32_t largest_ttl = 0x7fff'ffff;  // RFC 2181 section 8

void check(const dns_reply& r) {
    using outcome = dns_reply::outcome;
    fuzz::require(r.addresses.size() <= dns_reply_max_addresses, "more addresses than the cap");
    fuzz::require((r.what == outcome::addresses) == !r.addresses.empty(),
                  "addresses without the outcome addresses, or that outcome without any");
    fuzz::require(r.ttl <= largest_ttl, "a TTL with its top bit set");
    fuzz::require(r.ttl == 0 || r.what == outcome::addresses || r.what == outcome::no_such_name ||
                      r.what == outcome::no_data,
                  "a TTL on a failure");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> bytes(data, size);
    bool server_failure[2] = {};
    for (const std::uint16_t type : {dns_type_a, dns_type_aaaa}) {
        const dns_reply r = read_dns_reply(bytes, type);
        check(r);
        const dns_reply again = read_dns_reply(bytes, type);
        fuzz::require(again.what == r.what && again.ttl == r.ttl && again.addresses == r.addresses,
                      "two answers for one message");
        server_failure[type == dns_type_aaaa] = r.what == dns_reply::outcome::server_failure;
    }
    fuzz::require(server_failure[0] == server_failure[1], "a server failure for one type only");
    return 0;
}
