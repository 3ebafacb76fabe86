#pragma once
#include "politeproxy/base/clock.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

namespace politeproxy {

/// What the proxy knows of robots.txt (robots.crawl_delay: honor): for each origin, when
/// it was read and whether a fetch is under way; for each gate key, the rate its
/// origins' Crawl-delay allows (1/delay, the delay capped by max_delay).
///
/// Algorithm: the first request for an origin, or the first after its robots.txt grew
/// older than cache_ttl, is told to fetch it (`on_request`); requests while a fetch is
/// under way go on (the gate holds them: host_gates). A failed fetch is tried again after
/// `retry_after_failure` (or cache_ttl, if shorter), the rate staying as configured
/// meanwhile; a fetch that never reports back counts as failed after `fetch_timeout`.
/// A gate's cap lasts as long as the robots.txt that set it; a fresher one from the
/// same origin replaces it, one from another origin of the gate only lowers it.
/// Memory is bounded: past `max_origins`, expired entries go, then the oldest half.
///
/// Sans-io; time comes in as `now`. Locking: none; the owner serialises every call.
class robots_book {
public:
    static constexpr auto retry_after_failure = std::chrono::minutes(10);
    static constexpr auto fetch_timeout = std::chrono::minutes(5);
    static constexpr std::size_t max_origins = 100000;

    robots_book(clock::duration cache_ttl, clock::duration max_delay) : cache_ttl_(cache_ttl), max_delay_(max_delay) {}
    void configure(clock::duration cache_ttl, clock::duration max_delay);

    /// A request for `origin`: true when it must fetch robots.txt first (it then owns the
    /// fetch and must report it with fetched()).
    bool on_request(const std::string& origin, clock::time_point now);

    /// The fetch for `origin` (whose requests use gate `gate_key`) ended. `delay`: the
    /// Crawl-delay read (nullopt: none asked); `failed`: no robots.txt could be read.
    void fetched(const std::string& origin, const std::string& gate_key, std::optional<double> delay, bool failed,
                 clock::time_point now);

    /// The rate (tokens per second) robots.txt allows `gate_key`, while it is fresh.
    std::optional<double> rate_cap(const std::string& gate_key, clock::time_point now) const;

    std::size_t origins() const { return origins_.size(); }

private:
    struct origin_state {
        clock::time_point refetch_at{};  ///< when the next request fetches it again
        bool fetching = false;
        clock::time_point fetch_started{};
    };
    struct gate_cap {
        double rate = 0;
        clock::time_point until{};
        std::string origin;  ///< whose robots.txt set it
    };
    void make_room(clock::time_point now);

    clock::duration cache_ttl_;
    clock::duration max_delay_;
    std::unordered_map<std::string, origin_state> origins_;
    std::unordered_map<std::string, gate_cap> caps_;
};

}  // namespace politeproxy
