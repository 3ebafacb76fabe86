#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/policy/dns_cache.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace politeproxy {

struct dns_config;
class logger;
class metrics;

/// Names to addresses for the whole process: c-ares on the workers' event loops (no
/// thread per look-up), A and AAAA asked at once, answers kept in a dns_cache for their
/// TTLs, and one query in flight per name however many requests wait for it.
///
/// Servers: dns.servers, else /etc/resolv.conf's. /etc/hosts is read before DNS (its
/// answers kept for dns.min_ttl), as getaddrinfo would. A name whose refresh fails is
/// served its expired addresses for dns.stale_for (logged, counted as `stale`). Every
/// look-up is counted in dns_queries_total and timed in dns_lookup_seconds.
///
/// `dns:` is read at start; a reload keeps it.
///
/// Thread safety: resolve() from any thread (a query runs on the calling worker's loop
/// when it has one, else on the first's); peek() from any thread. Add every loop before
/// the first resolve(); destroy after the loops stopped running.
class dns_resolver {
public:
    struct result {
        /// host_not_found: no such name; host_not_found_try_again: DNS did not answer (or
        /// failed) and nothing stale was left; timed_out: the deadline came first.
        boost::system::error_code ec;
        std::vector<boost::asio::ip::tcp::endpoint> endpoints;  ///< in connect order (RFC 8305)
    };

    dns_resolver(const dns_config& cfg, metrics& m, const logger& log);
    ~dns_resolver();
    dns_resolver(const dns_resolver&) = delete;
    dns_resolver& operator=(const dns_resolver&) = delete;

    /// A worker's loop: its queries run on a channel of their own there.
    void add_loop(boost::asio::io_context& ioc);

    task<result> resolve(std::string host, std::uint16_t port, clock::time_point deadline);

    /// What the cache holds for `name` now, without counting as a use. The addresses are
    /// copied out.
    struct cached {
        dns_cache::hit::kind what = dns_cache::hit::kind::miss;
        std::vector<ip_bytes> addresses;
        clock::time_point expires{};
    };
    cached peek(const std::string& name) const;

    /// Up to 8 of a name's addresses, in connect order, copied without allocating.
    struct few_addresses {
        std::array<ip_bytes, 8> at{};
        std::size_t size = 0;
    };
    /// The name's addresses when the cache can answer now (fresh, or served stale) without
    /// a look-up; counts as a use. Nothing otherwise: resolve() it.
    std::optional<few_addresses> cached_now(std::string_view name);

    /// Happy Eyeballs' delay between two connect attempts (dns.connection_attempt_delay).
    clock::duration attempt_delay() const;
    /// Where look-ups and connect attempts are counted.
    metrics& counters() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace politeproxy
