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
/// Sans-io. Thread safety: every member may be used from any thread (atomics); a count
/// can pass its cap only through the *_anyway calls, which are for requests that already
/// counted once (a slot taken back goes back to waiting).
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
    bool try_wait();
    void wait_anyway() { waiting_.fetch_add(1, std::memory_order_relaxed); }
    void stop_waiting() { waiting_.fetch_sub(1, std::memory_order_relaxed); }
    /// One more request holds a slot, unless clients.max_in_flight do.
    bool try_hold();
    void hold_anyway() { in_flight_.fetch_add(1, std::memory_order_seq_cst); }
    /// A request gave its slot back. True when the client was at its cap: requests of it
    /// that a gate set aside may go now (someone must run those gates).
    bool unhold();
    /// Whether try_hold() would succeed now.
    bool may_hold() const { return in_flight_.load(std::memory_order_seq_cst) < max_in_flight_.load(std::memory_order_relaxed); }

    std::size_t waiting() const { return waiting_.load(std::memory_order_relaxed); }
    std::size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

    void count(outcome o) { outcomes_[static_cast<std::size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
    std::array<std::uint64_t, outcome_count> outcomes() const;

private:
    const std::string name_;
    std::atomic<unsigned> weight_;
    std::atomic<std::size_t> max_waiting_;
    std::atomic<std::size_t> max_in_flight_;
    std::atomic<std::size_t> waiting_{0};
    std::atomic<std::size_t> in_flight_{0};
    std::array<std::atomic<std::uint64_t>, outcome_count> outcomes_{};
};

}  // namespace politeproxy
