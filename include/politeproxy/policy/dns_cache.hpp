#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/policy/address_filter.hpp"

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace politeproxy {

/// What a look-up of one name brought back (both families asked).
struct dns_answer {
    enum class outcome : std::uint8_t {
        found,         ///< at least one address
        no_such_name,  ///< NXDOMAIN, or no address of either family (NODATA)
        failed,        ///< no answer to keep: timeout, SERVFAIL, no server reachable
    };
    outcome what = outcome::failed;
    std::vector<ip_bytes> v6;  ///< as the server ordered them
    std::vector<ip_bytes> v4;  ///< IPv4-mapped
    /// found: the smallest TTL of the record sets; no_such_name: the negative TTL the
    /// server gave (RFC 2308: its SOA's), zero if none.
    clock::duration ttl{};
};

/// The proxy's memory of names: what each resolved to, and until when.
///
/// Algorithm. An answer is kept for its TTL clamped to [min_ttl, max_ttl]; a name that
/// does not exist for its negative TTL capped by negative_ttl (zero: not kept). An expired
/// answer is refreshed by the next request that wants it. When the refresh fails, the old
/// addresses are served (RFC 8767, "serve stale") until stale_for after they expired,
/// and asked for again at most every `stale_recheck` meanwhile, so a DNS outage does not
/// turn every request into a query that times out. At most max_names names: the least
/// recently used goes first. Addresses are kept in the order a connect tries them
/// (RFC 8305 section 4): IPv6 first, then the families alternating.
///
/// A look-up of a name in the cache allocates nothing. Sans-io: the time is passed in.
/// Locking: none; the owner serialises calls.
class dns_cache {
public:
    struct settings {
        clock::duration min_ttl = std::chrono::seconds(5);
        clock::duration max_ttl = std::chrono::hours(1);
        clock::duration negative_ttl = std::chrono::seconds(30);
        clock::duration stale_for = std::chrono::minutes(5);
        std::size_t max_names = 100000;
    };
    /// Between two refreshes of a stale name while its refreshes fail.
    static constexpr clock::duration stale_recheck = std::chrono::seconds(5);

    /// What the cache holds for a name at a moment.
    struct hit {
        enum class kind : std::uint8_t {
            miss,      ///< nothing (or nothing usable): ask DNS
            fresh,     ///< addresses within their TTL
            negative,  ///< the name does not exist, within the negative TTL
            expired,   ///< addresses past their TTL: ask DNS (they may be served stale if that fails)
            stale,     ///< addresses past their TTL whose refresh failed: serve them, do not ask yet
        };
        kind what = kind::miss;
        std::span<const ip_bytes> addresses;  ///< fresh, expired, stale: valid until the next change of the cache
        clock::time_point expires{};          ///< fresh, negative: until then
    };

    explicit dns_cache(settings s) : settings_(s) {}

    /// The name's state at `now`; counts as a use (least recently used goes first).
    hit find(std::string_view name, clock::time_point now);
    /// Keeps what a look-up brought back and returns what to use now: fresh (even with a
    /// TTL of zero: the requests that waited for it use it) or negative for an answer; for
    /// a failed look-up, stale (the old addresses, while within stale_for of their expiry)
    /// or miss.
    hit store(std::string_view name, const dns_answer& answer, clock::time_point now);
    /// The name's state without counting as a use (the admin's view).
    hit peek(std::string_view name, clock::time_point now) const;

    std::size_t size() const { return by_name_.size(); }
    const settings& limits() const { return settings_; }

private:
    struct name_entry {
        std::string name;
        std::vector<ip_bytes> addresses;  ///< in connect order; empty: the name does not exist
        clock::time_point expires{};
        clock::time_point recheck{};  ///< a failed refresh: served stale until then
    };
    using lru = std::list<name_entry>;

    hit state_of(const name_entry& e, clock::time_point now) const;
    lru::iterator slot_for(std::string_view name);

    settings settings_;
    lru entries_;  ///< most recently used first
    std::unordered_map<std::string_view, lru::iterator, keyed_string_hash> by_name_;  ///< views into entries_' names
};

/// `v6` and `v4` in the order a connect tries them: IPv6 first, the families alternating
/// (RFC 8305 section 4), the rest of the longer list at the end.
std::vector<ip_bytes> interleave_families(std::span<const ip_bytes> v6, std::span<const ip_bytes> v4);

/// True for an IPv4-mapped address (ipv4_bytes).
bool is_ipv4(const ip_bytes& a);

}  // namespace politeproxy
