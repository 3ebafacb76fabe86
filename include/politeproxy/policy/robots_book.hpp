#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/policy/robots_txt.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace politeproxy {

/// What one fetch of an origin's robots.txt learnt (RFC 9309 2.3.1).
struct robots_read {
    enum class kind : std::uint8_t {
        rules,            ///< 2xx: `rules` as parsed
        no_restrictions,  ///< 4xx but 429 ("unavailable")
        unreachable,      ///< 5xx, 429, a throttle signal, a timeout, no connection: a complete disallow for now
        not_read,         ///< the proxy did not get to ask (its own refusal: a full queue, a busy parent, shutdown)
    };
    kind what = kind::not_read;
    std::shared_ptr<const robots_rules> rules;  ///< with kind::rules
    std::optional<double> delay;                ///< the Crawl-delay asked of the fetching client
};

/// What robots.txt says of one request now: `rules` to match the request's path against
/// (outside the book's lock: matching costs up to path x pattern per rule), or why not.
struct robots_verdict {
    enum class kind : std::uint8_t {
        read,         ///< `rules` say
        unreachable,  ///< no robots.txt could be read: nothing goes until `retry_after` (the next fetch)
        unknown,      ///< a fetch is under way, or due
    };
    kind what = kind::unknown;
    std::shared_ptr<const robots_rules> rules{};  ///< with kind::read
    clock::duration retry_after{};
};

/// What the proxy knows of robots.txt (robots.crawl_delay: honor, robots.disallow:
/// enforce): for each origin, its rules as last read, when to read them again and whether
/// a fetch is under way; for each gate key, the rate its origins' Crawl-delay allows
/// (1/delay, the delay capped by max_delay).
///
/// Algorithm: the first request for an origin, or the first after its robots.txt grew
/// older than cache_ttl, is told to fetch it (`on_request`); requests while a fetch is
/// under way wait for it (their verdict is `unknown`). A read (2xx) or a 4xx is good for
/// cache_ttl. An unreachable robots.txt (RFC 9309 2.3.1.4) disallows everything until
/// the next fetch, which is due after `backoff` doubling per consecutive failure (the
/// caller passes the host's backoff.initial and backoff.max); a copy read earlier keeps
/// serving meanwhile, up to cache_ttl past the time it was due again. A fetch that never
/// reports back counts as unreachable after `fetch_timeout`. A fetch the proxy did not
/// get to make (not_read) changes nothing but that the next request fetches again.
/// A gate's rate cap lasts as long as the robots.txt that set it; a fresher one from the
/// same origin replaces it, one from another origin of the gate only lowers it.
/// Memory is bounded: past `max_origins` origins or `max_rule_bytes` of rules, expired
/// entries go, then the oldest half (they are fetched again when asked for).
///
/// Sans-io; time comes in as `now`. Locking: none; the owner serialises every call.
class robots_book {
public:
    static constexpr auto fetch_timeout = std::chrono::minutes(5);
    static constexpr std::size_t max_origins = 100000;
    static constexpr std::size_t max_rule_bytes = 64 * 1024 * 1024;

    struct backoff {
        clock::duration initial = std::chrono::seconds(5);
        clock::duration max = std::chrono::minutes(10);
    };

    robots_book(clock::duration cache_ttl, clock::duration max_delay) : cache_ttl_(cache_ttl), max_delay_(max_delay) {}
    void configure(clock::duration cache_ttl, clock::duration max_delay);

    /// A request for `origin`: true when it must fetch robots.txt first (it then owns the
    /// fetch and must report it with fetched()).
    bool on_request(const std::string& origin, clock::time_point now);

    /// The fetch for `origin` (whose requests use gate `gate_key`, whose host backs off
    /// by `retry`) ended with `read`.
    void fetched(const std::string& origin, const std::string& gate_key, const robots_read& read, backoff retry,
                 clock::time_point now);

    /// What `origin`'s robots.txt says now (the rules to match, or why there are none).
    robots_verdict verdict(const std::string& origin, clock::time_point now) const;

    /// The rate (tokens per second) robots.txt allows `gate_key`, while it is fresh.
    std::optional<double> rate_cap(const std::string& gate_key, clock::time_point now) const;

    std::size_t origins() const { return origins_.size(); }
    std::size_t rule_bytes() const { return rule_bytes_; }

private:
    struct origin_state {
        std::shared_ptr<const robots_rules> rules;  ///< the copy that serves; null: none read
        clock::time_point serves_until{};           ///< the copy's end, past any refetch
        clock::time_point refetch_at{};             ///< when the next request fetches it again
        clock::time_point fetch_started{};
        unsigned failures = 0;  ///< consecutive unreachable fetches
        bool fetching = false;
    };
    struct gate_cap {
        double rate = 0;
        clock::time_point until{};
        std::string origin;  ///< whose robots.txt set it
    };
    void update_cap(const std::string& origin, const std::string& gate_key, std::optional<double> delay,
                    clock::time_point now);
    void keep(origin_state& state, std::shared_ptr<const robots_rules> rules, clock::time_point until);
    void make_room(clock::time_point now);
    using origin_map = std::unordered_map<std::string, origin_state, keyed_string_hash, std::equal_to<>>;
    void forget(origin_map::iterator it);

    clock::duration cache_ttl_;
    clock::duration max_delay_;
    origin_map origins_;
    std::unordered_map<std::string, gate_cap, keyed_string_hash, std::equal_to<>> caps_;
    std::size_t rule_bytes_ = 0;
};

}  // namespace politeproxy
