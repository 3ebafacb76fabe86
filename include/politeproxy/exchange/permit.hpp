#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/time_source.hpp"
#include "politeproxy/policy/group_ladder.hpp"
#include "politeproxy/policy/outcome.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace politeproxy {

class host_gates;
class client_state;
struct host_entry;
struct host_policy;
struct health_signal;

/// One granted slot of one host's gate (and of its groups). Move-only; the destructor
/// gives the slots back (group slots first: the reverse of taking them) and records how
/// the request ended, so no path (success, error, timeout, client gone,
/// exception) can leak it. An empty permit owns nothing.
///
/// Thread safety: one owner at a time; release takes the gate's lock.
class permit {
public:
    permit() = default;
    permit(permit&& other) noexcept;
    permit& operator=(permit&& other) noexcept;
    permit(const permit&) = delete;
    permit& operator=(const permit&) = delete;
    ~permit();

    explicit operator bool() const { return entry_ != nullptr; }

    /// Recorded when the permit is released; `error` unless set.
    void set_outcome(outcome o) { outcome_ = o; }

    /// Tells the host's health controller how the request went (latency to response
    /// headers, throttling, refusal). Takes effect at once: a 429 collapses the host
    /// before this request's body has even been relayed.
    void report(health_signal signal);
    clock::duration queue_wait() const { return queue_wait_; }
    /// Where its gates read the time (host_gates::time): what its latencies are measured in.
    time_source time() const;
    /// The host's policy when the request departed (a reload does not change it).
    const host_policy& policy() const;

    /// Gives the slot back now (the destructor does it otherwise).
    void reset();

private:
    friend class host_gates;
    permit(host_gates* owner, std::shared_ptr<host_entry> entry, std::shared_ptr<const host_policy> policy,
           clock::duration queue_wait, std::uint64_t epoch)
        : owner_(owner), entry_(std::move(entry)), policy_(std::move(policy)), queue_wait_(queue_wait), epoch_(epoch) {}

    host_gates* owner_ = nullptr;
    std::uint64_t lease_ = 0;  ///< the fleet lease (0: none), given back with the slot
    std::unique_ptr<group_ladder> group_slots_;  ///< groups.domain, groups.ip: the slots held; null: none
    std::shared_ptr<host_entry> entry_;
    std::shared_ptr<const host_policy> policy_;  ///< as it was at departure
    std::shared_ptr<client_state> client_;       ///< whose request (clients:); null: nobody's
    clock::duration queue_wait_{};
    std::uint64_t epoch_ = 0;  ///< the health controller's epoch at departure
    outcome outcome_ = outcome::error;
    /// False while a local slot waits for its fleet lease: dropped then, it ends no
    /// request (the request parks again, or is answered and counted as refused).
    bool counted_ = true;
};

}  // namespace politeproxy
