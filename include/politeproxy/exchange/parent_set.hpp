#pragma once
// The parent proxies as the running proxy knows them (SPEC.md `parents`, `routes`): each
// one's health (policy/parent_health), the requests and tunnels it carries (bounded by
// max_connections: a request waits for a turn at most queue.max_wait), its counters for
// /metrics; and the choice of a way for a destination (policy/parent_route). Shared by
// every worker; a reload keeps the state of a parent whose entry is unchanged (a changed
// one starts anew: health, turns, counters), and requests in flight finish on the parent
// they chose (they hold it).
//
// max_connections bounds the turns a parent gives at once: each request it carries (an
// HTTP/1.1 request holds its connection; each HTTP/2 stream in a tunnel is a request) and
// each CONNECT tunnel spliced through it. Idle pooled connections hold no turn.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/time_source.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/policy/outcome.hpp"
#include "politeproxy/policy/parent_health.hpp"

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace politeproxy {

class logger;

/// One parent proxy.
class parent_state {
public:
    parent_state(parent_config cfg, time_source time, std::uint64_t seed);

    const parent_config& config() const { return cfg_; }
    const std::string& name() const { return cfg_.name; }
    /// Its pool key for plain-HTTP requests (absolute-form, any destination), and part of
    /// its tunnels' keys: "parent NAME #SERIAL", this state's own (a reload that changes
    /// the parent's address or credentials makes a new state: no connection is shared).
    const std::string& pool_key() const { return pool_key_; }
    time_source time() const { return time_; }

    bool usable() const;
    bool up() const;
    clock::time_point down_until() const;
    /// The parent itself failed (connect, no answer); logs when this marks it down.
    void failed(const logger& log, std::string_view what);
    /// It carried a request or tunnel to an answer.
    void answered();
    /// Its 407: the proxy's credentials for it are wrong (logged once).
    void refused_credentials(const logger& log);

    /// Requests and tunnels it carries now.
    std::size_t busy() const { return busy_.load(std::memory_order_relaxed); }
    /// A turn to carry one more, if one is free now (give it back with release()).
    bool try_take();
    /// Waits for a turn until `deadline`: false when it passed (or the waiting coroutine
    /// was cancelled) first.
    task<bool> take(clock::time_point deadline);
    void release();

    /// parent_requests_total{outcome}, parent_connect_seconds.
    void count(outcome o) { requests_[static_cast<std::size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
    void connected(clock::duration took);

    struct counts {
        std::array<std::uint64_t, outcome_count> requests{};
        std::vector<std::uint64_t> connect_buckets;  ///< cumulative, one per connect_bucket_bounds
        std::uint64_t connects = 0;
        double connect_seconds = 0;
    };
    counts snapshot() const;
    static std::span<const double> connect_bucket_bounds();

private:
    struct waiter;

    parent_config cfg_;
    std::string pool_key_;
    time_source time_;
    mutable std::mutex lock_;  ///< health_ and waiters_
    parent_health health_;
    std::deque<std::shared_ptr<waiter>> waiters_;
    std::atomic<std::size_t> busy_{0};
    std::atomic<bool> warned_credentials_{false};
    std::array<std::atomic<std::uint64_t>, outcome_count> requests_{};
    std::array<std::atomic<std::uint64_t>, 10> connect_buckets_{};
    std::atomic<std::uint64_t> connects_{0};
    std::atomic<std::uint64_t> connect_micros_{0};
};

/// A turn at a parent, held for as long as a request or tunnel goes through it; empty: direct.
class parent_turn {
public:
    parent_turn() = default;
    explicit parent_turn(std::shared_ptr<parent_state> p) : parent_(std::move(p)) {}
    parent_turn(parent_turn&&) noexcept = default;
    parent_turn& operator=(parent_turn&& o) noexcept {
        if (this != &o) {
            reset();
            parent_ = std::move(o.parent_);
        }
        return *this;
    }
    ~parent_turn() { reset(); }

    parent_state* get() const { return parent_.get(); }
    parent_state* operator->() const { return parent_.get(); }
    explicit operator bool() const { return parent_ != nullptr; }
    void reset() {
        if (parent_) parent_->release();
        parent_.reset();
    }

private:
    std::shared_ptr<parent_state> parent_;
};

/// Where one request goes: direct, or through `parent` (not yet a turn at it).
struct way {
    std::shared_ptr<parent_state> parent;  ///< null: direct
    /// When no way of its route is usable: the first parent's name (next-hop) and when one
    /// comes back (Retry-After).
    std::string all_down;
    clock::duration retry_after{};
};

class parent_set {
public:
    explicit parent_set(time_source time) : time_(time) {}

    /// Takes `cfg`'s parents and routes (at start and at each reload).
    void update(const config& cfg);

    /// The way for a destination (`key`, its `addresses` when known) by the current routes:
    /// the route's pick among its usable ways, skipping `tried` (a parent that just failed
    /// this request).
    way choose(std::string_view key, std::span<const ip_bytes> addresses, const parent_state* tried = nullptr);

    /// The route's parents for `key` as named by the current routes (for /hosts), empty: direct.
    std::vector<std::string> route_names(std::string_view key) const;

    /// Every parent now, for /metrics.
    std::vector<std::shared_ptr<parent_state>> parents() const;

private:
    struct table {
        std::vector<std::shared_ptr<parent_state>> parents;
        std::vector<parent_route> routes;
        std::unique_ptr<std::atomic<std::uint64_t>[]> turns;  ///< per route: round_robin
    };
    std::shared_ptr<const table> current() const;

    time_source time_;
    mutable std::mutex lock_;
    std::shared_ptr<const table> table_ = std::make_shared<table>();
};

}  // namespace politeproxy
