#pragma once
#include "politeproxy/policy/address_filter.hpp"
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"

#include "politeproxy/base/executor.hpp"
#include <boost/asio/ip/address.hpp>
#include "politeproxy/net/timed_socket.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace politeproxy {

struct config;
class dns_resolver;

/// why: dns_failure, dns_timeout, destination_denied, origin_refused or origin_connect_timeout.
using connect_failure = failure;

/// Resolves the host `key` (static `resolve:` entries first, then DNS), drops every
/// address that security.deny_destinations forbids or that is the proxy's own listener
/// with `port`, and connects `stream` to the first
/// permitted one that answers; with `pinned`, to that address only (the deny list is
/// checked again). Name look-up and connect together are bounded by `timeout`.
task<std::optional<connect_failure>> connect_origin(
    const config& cfg, dns_resolver& resolver, timed_socket& stream, const std::string& key,
    std::uint16_t port, clock::duration timeout, const std::optional<boost::asio::ip::address>& pinned = {});

/// Connects `stream` to a parent proxy at `host` (an address, a `resolve:` entry or a
/// name) and `port`: trusted configuration, so the deny list is not applied. Bounded by
/// `timeout`.
task<std::optional<connect_failure>> connect_parent(const config& cfg, dns_resolver& resolver, timed_socket& stream,
                                                    const std::string& host, std::uint16_t port,
                                                    clock::duration timeout);

/// Every address of the destination `key`: its literal, its static entry, or what DNS
/// gives (bounded by `timeout`), none judged yet.
task<std::variant<std::vector<ip_bytes>, connect_failure>> destination_addresses(const config& cfg,
                                                                                dns_resolver& resolver,
                                                                                const std::string& key,
                                                                                std::uint16_t port,
                                                                                clock::duration timeout);

/// destination_denied when the deny list refuses any of `addresses` (or one is the proxy's
/// own listener with `port`): a parent proxy connects to a destination by its name and
/// picks its own address among them, so none may be denied.
std::optional<connect_failure> check_every_address(const config& cfg, std::span<const ip_bytes> addresses,
                                                   std::uint16_t port);

/// The address a request will connect to, when it is chosen before admission.
struct pinned_address {
    std::optional<boost::asio::ip::address> address;  ///< empty: any of the host's addresses
    std::string text;                                  ///< its text: the ip group's key; empty with it
};

/// Whether requests under `cfg` need their address before admission: `key: ip` and
/// `groups.ip` count by the address connected to.
bool admission_needs_address(const config& cfg);

/// Chooses that address: the first of `key`'s addresses the deny list permits. The
/// look-up is bounded by the host's timeouts.connect.
task<std::variant<pinned_address, connect_failure>> pin_origin_address(const config& cfg, dns_resolver& resolver,
                                                                       const std::string& key, std::uint16_t port);
/// The same without waiting (no look-up, no coroutine, nothing allocated for an IPv4
/// address) when the key is an address or a `resolve:` entry, or its name is cached;
/// nothing when only a look-up can tell (then pin_origin_address).
std::optional<std::variant<pinned_address, connect_failure>> pin_origin_address_at_once(const config& cfg,
                                                                                        dns_resolver& resolver,
                                                                                        const std::string& key,
                                                                                        std::uint16_t port);

/// The deny list's answer for a host whose address is known without a look-up (it is
/// an `address`, or `key` has a static `resolve:` entry): checked before the request
/// takes a slot. nullopt when permitted or when only DNS can tell (connect_origin
/// checks those). The proxy's own listeners (security.own) are denied whatever the
/// allow list says, here and in connect_origin.
std::optional<connect_failure> check_known_destination(const config& cfg, const std::string& key, std::uint16_t port,
                                                       const std::optional<ip_bytes>& address);

/// The address in the form the address filters use.
ip_bytes bytes_of(const boost::asio::ip::address& a);
/// And back (an IPv4-mapped one as IPv4).
boost::asio::ip::address address_of(const ip_bytes& a);

}  // namespace politeproxy
