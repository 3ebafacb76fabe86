#pragma once
// One client (a crawler sharing the proxy with others) as every host's gate sees it.
#include "politeproxy/policy/outcome.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace politeproxy {

/// A client's name, its weight in each host's fair queue (clients.weights), and its
/// counts across all hosts: requests waiting for a slot (against clients.max_waiting)
/// and requests holding one (against clients.max_in_flight: at origins, or holding their
/// slot while their token or fleet lease comes). The gates keep the counts (policy/gate:
/// a request moves from waiting to holding when it takes its slot); requests_total by
/// outcome is kept by whoever ends a request.
///
/// Sans-io. Thread safety: every member may be used from any thread. Both counts live in
/// one atomic word, so each step of a request (park, take a slot, give it back) is one
/// atomic operation; a count passes its cap only through the *_anyway calls, for
/// requests that already counted once (a slot taken back goes back to waiting).
class client_account {
public:
    client_account(std::string name, unsigned weight, std::size_t max_waiting, std::size_t max_in_flight)
        : name_(std::move(name)), weight_(weight), max_waiting_(max_waiting), max_in_flight_(max_in_flight) {}
    client_account(const client_account&) = delete;
    client_account& operator=(const client_account&) = delete;

    const std::string& name() const { return name_; }
    unsigned weight() const { return weight_.load(std::memory_order_relaxed); }
    /// A reload: takes effect at each gate's next turn; counts above a lowered cap stay.
    void set_limits(unsigned weight, std::size_t max_waiting, std::size_t max_in_flight);

    /// One more request waits for a slot, unless clients.max_waiting are waiting.
    bool try_wait() { return try_add(one_waiting); }
    void wait_anyway() { counts_.fetch_add(one_waiting, std::memory_order_seq_cst); }
    void stop_waiting() { counts_.fetch_sub(one_waiting, std::memory_order_seq_cst); }
    /// A waiting request takes its slot (waiting to holding), unless clients.max_in_flight
    /// hold one.
    bool try_take_slot() { return try_add(one_holding - one_waiting); }
    /// A request that did not wait holds a slot, unless clients.max_in_flight do.
    bool try_hold() { return try_add(one_holding); }
    void hold_anyway() { counts_.fetch_add(one_holding, std::memory_order_seq_cst); }
    /// A request gave its slot back. True when the client was at its cap: requests of it
    /// that a gate set aside may go now (someone must run those gates).
    bool unhold() {
        // seq_cst: a gate that saw the cap registers itself, then runs again
        // (exchange/client_book); this decrement and that registration cannot both miss
        // each other.
        const auto before = counts_.fetch_sub(one_holding, std::memory_order_seq_cst);
        return holding_of(before) >= max_in_flight_.load(std::memory_order_relaxed);
    }
    /// Whether a slot could be held now.
    bool may_hold() const {
        return holding_of(counts_.load(std::memory_order_seq_cst)) < max_in_flight_.load(std::memory_order_relaxed);
    }

    std::size_t waiting() const { return waiting_of(counts_.load(std::memory_order_relaxed)); }
    std::size_t in_flight() const { return holding_of(counts_.load(std::memory_order_relaxed)); }

    void count(outcome o) { outcomes_[static_cast<std::size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
    std::array<std::uint64_t, outcome_count> outcomes() const;

private:
    // counts_: waiting in the low 32 bits, holding in the high 32.
    static constexpr std::uint64_t one_waiting = 1;
    static constexpr std::uint64_t one_holding = std::uint64_t{1} << 32;
    static std::size_t waiting_of(std::uint64_t c) { return static_cast<std::uint32_t>(c); }
    static std::size_t holding_of(std::uint64_t c) { return static_cast<std::size_t>(c >> 32); }
    /// Adds `delta` (modulo 2^64: a step may take one waiting away) unless the result
    /// passes a cap that it raises.
    bool try_add(std::uint64_t delta) {
        auto c = counts_.load(std::memory_order_seq_cst);
        for (;;) {
            const auto next = c + delta;
            if (static_cast<std::uint32_t>(delta) == 1 && waiting_of(next) > max_waiting_.load(std::memory_order_relaxed))
                return false;
            if (holding_of(next) > holding_of(c) && holding_of(next) > max_in_flight_.load(std::memory_order_relaxed))
                return false;
            if (counts_.compare_exchange_weak(c, next, std::memory_order_seq_cst)) return true;
        }
    }

    const std::string name_;
    std::atomic<unsigned> weight_;
    std::atomic<std::size_t> max_waiting_;
    std::atomic<std::size_t> max_in_flight_;
    std::atomic<std::uint64_t> counts_{0};
    std::array<std::atomic<std::uint64_t>, outcome_count> outcomes_{};
};

}  // namespace politeproxy
