#include "politeproxy/net/origin_connect.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/net/happy_eyeballs.hpp"
#include "politeproxy/policy/dns_cache.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <cstring>
#include <vector>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

ip_bytes bytes_of(const asio::ip::address& a) {
    if (a.is_v4()) return ipv4_bytes(a.to_v4().to_uint());
    ip_bytes b{};
    const auto v6 = a.to_v6().to_bytes();
    std::memcpy(b.data(), v6.data(), b.size());
    return b;
}

asio::ip::address address_of(const ip_bytes& a) {
    if (is_ipv4(a)) {
        asio::ip::address_v4::bytes_type b;
        std::memcpy(b.data(), a.data() + 12, 4);
        return asio::ip::address_v4(b);
    }
    asio::ip::address_v6::bytes_type b;
    std::memcpy(b.data(), a.data(), 16);
    return asio::ip::address_v6(b);
}

namespace {

// The deny list's answer for one address, and the proxy's own listeners' (whatever the
// allow list says); null when permitted.
const char* refusal_of(const config& cfg, const ip_bytes& address, std::uint16_t port) {
    if (cfg.security.own.contains(address, port)) return " is this proxy's own listener";
    if (!cfg.security.destinations.permitted(address)) return " is denied";
    return nullptr;
}

}  // namespace

std::optional<connect_failure> check_known_destination(const config& cfg, const std::string& key, std::uint16_t port,
                                                       const std::optional<ip_bytes>& address) {
    const resolve_entry* entry = address ? nullptr : cfg.static_entry(key);
    if (!address && !entry) return std::nullopt;
    const char* refusal = refusal_of(cfg, address ? *address : entry->bytes, port);
    if (!refusal) return std::nullopt;
    return connect_failure{errc::destination_denied, "destination " + (entry ? entry->address : key) + refusal};
}

namespace {

using endpoints_or_failure = std::variant<std::vector<tcp::endpoint>, connect_failure>;

// Every address of `key`: `pinned`, its literal, its static entry, or what DNS gives.
task<endpoints_or_failure> addresses_of(const config& cfg, dns_resolver& resolver, const std::string& key,
                                        std::uint16_t port, clock::time_point deadline,
                                        const std::optional<asio::ip::address>& pinned) {
    std::vector<tcp::endpoint> candidates;
    boost::system::error_code ec;
    const std::string_view literal = cfg.static_address(key).value_or(key);
    if (pinned) {
        candidates.emplace_back(*pinned, port);
    } else if (const auto address = asio::ip::make_address(literal, ec); !ec) {
        candidates.emplace_back(address, port);
    } else {
        auto found = co_await resolver.resolve(key, port, deadline);
        if (found.ec == asio::error::timed_out)
            co_return connect_failure{errc::dns_timeout, "looking up " + key + " timed out"};
        if (found.ec) co_return connect_failure{errc::dns_failure, "cannot resolve " + key};
        candidates = std::move(found.endpoints);
    }
    co_return candidates;
}

// The addresses of `key` the deny list permits (at least one), or why there are none.
task<endpoints_or_failure> permitted_endpoints(const config& cfg, dns_resolver& resolver, const std::string& key,
                                               std::uint16_t port, clock::time_point deadline,
                                               const std::optional<asio::ip::address>& pinned) {
    auto found = co_await addresses_of(cfg, resolver, key, port, deadline, pinned);
    if (auto* failure = std::get_if<connect_failure>(&found)) co_return std::move(*failure);
    const auto& candidates = std::get<0>(found);
    std::vector<tcp::endpoint> permitted;
    const char* refusal = nullptr;
    for (const auto& e : candidates) {
        const char* r = refusal_of(cfg, bytes_of(e.address()), port);
        if (!r) permitted.push_back(e);
        else if (!refusal) refusal = r;
    }
    if (permitted.empty())
        co_return connect_failure{errc::destination_denied,
                                  "destination " + candidates.front().address().to_string() + refusal};
    co_return permitted;
}

// Every address tried, several at once (happy_eyeballs); `stream` becomes the winner's.
task<std::optional<connect_failure>> connect_to(dns_resolver& resolver, timed_socket& stream,
                                                const std::vector<tcp::endpoint>& endpoints, clock::time_point deadline) {
    auto won = co_await connect_first(endpoints, resolver.attempt_delay(), deadline, resolver.counters());
    if (const auto* cec = std::get_if<boost::system::error_code>(&won)) {
        if (*cec == asio::error::timed_out) co_return connect_failure{errc::origin_connect_timeout, "connect timed out"};
        co_return connect_failure{errc::origin_refused, "connect failed: " + cec->message()};
    }
    stream = timed_socket(std::move(std::get<tcp_socket>(won)));
    boost::system::error_code ec;
    stream.socket().set_option(tcp::no_delay(true), ec);
    co_return std::nullopt;
}

}  // namespace

bool admission_needs_address(const config& cfg) { return cfg.key == config::key_kind::ip || cfg.groups.ip; }

std::optional<std::variant<pinned_address, connect_failure>> pin_origin_address_at_once(const config& cfg,
                                                                                        dns_resolver& resolver,
                                                                                        const std::string& key,
                                                                                        std::uint16_t port) {
    boost::system::error_code ec;
    const std::string_view literal = cfg.static_address(key).value_or(key);
    if (const auto address = asio::ip::make_address(literal, ec); !ec) {
        if (const char* refusal = refusal_of(cfg, bytes_of(address), port))
            return connect_failure{errc::destination_denied, "destination " + address.to_string() + refusal};
        return pinned_address{address, address.to_string()};
    }
    const auto cached = resolver.cached_now(key);
    if (!cached) return std::nullopt;
    for (std::size_t i = 0; i < cached->size; ++i)
        if (!refusal_of(cfg, cached->at[i], port)) {
            const auto address = address_of(cached->at[i]);
            return pinned_address{address, address.to_string()};
        }
    return std::nullopt;  // none of the first few permitted: the look-up's path judges them all
}

task<std::variant<pinned_address, connect_failure>> pin_origin_address(const config& cfg, dns_resolver& resolver,
                                                                       const std::string& key, std::uint16_t port) {
    const auto timeout = cfg.policy_for(key, utc_today()).timeouts.connect;
    auto found = co_await permitted_endpoints(cfg, resolver, key, port, clock::now() + timeout, std::nullopt);
    if (auto* failure = std::get_if<connect_failure>(&found)) co_return std::move(*failure);
    const auto address = std::get<0>(found).front().address();
    co_return pinned_address{address, address.to_string()};
}

task<std::optional<connect_failure>> connect_origin(const config& cfg, dns_resolver& resolver,
                                                    timed_socket& stream, const std::string& key,
                                                    std::uint16_t port, clock::duration timeout,
                                                    const std::optional<asio::ip::address>& pinned) {
    const auto deadline = clock::now() + timeout;
    auto found = co_await permitted_endpoints(cfg, resolver, key, port, deadline, pinned);
    if (auto* failure = std::get_if<connect_failure>(&found)) co_return std::move(*failure);
    co_return co_await connect_to(resolver, stream, std::get<0>(found), deadline);
}

task<std::optional<connect_failure>> connect_parent(const config& cfg, dns_resolver& resolver, timed_socket& stream,
                                                    const std::string& host, std::uint16_t port,
                                                    clock::duration timeout) {
    const auto deadline = clock::now() + timeout;
    auto found = co_await addresses_of(cfg, resolver, host, port, deadline, std::nullopt);
    if (auto* failure = std::get_if<connect_failure>(&found)) co_return std::move(*failure);
    co_return co_await connect_to(resolver, stream, std::get<0>(found), deadline);
}

task<std::variant<std::vector<ip_bytes>, connect_failure>> destination_addresses(const config& cfg,
                                                                                dns_resolver& resolver,
                                                                                const std::string& key,
                                                                                std::uint16_t port,
                                                                                clock::duration timeout) {
    auto found = co_await addresses_of(cfg, resolver, key, port, clock::now() + timeout, std::nullopt);
    if (auto* failure = std::get_if<connect_failure>(&found)) co_return std::move(*failure);
    std::vector<ip_bytes> addresses;
    for (const auto& e : std::get<0>(found)) addresses.push_back(bytes_of(e.address()));
    co_return addresses;
}

std::optional<connect_failure> check_every_address(const config& cfg, std::span<const ip_bytes> addresses,
                                                   std::uint16_t port) {
    for (const ip_bytes& a : addresses)
        if (const char* refusal = refusal_of(cfg, a, port))
            return connect_failure{errc::destination_denied, "destination " + address_text(a) + refusal};
    return std::nullopt;
}

}  // namespace politeproxy
