#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/config/config.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace politeproxy {

class logger;
class metrics;

namespace fleet {

/// What a process asks the fleet for, from its own view of the host (the store's shared
/// values win where a process published them).
struct lease_terms {
    std::size_t limit = 1;
    double rate = 1;
    double burst = 1;
};

/// The store's answer to one acquire.
struct lease_answer {
    enum class result : std::uint8_t { granted, refused, store_down };
    result what = result::store_down;
    std::uint64_t lease = 0;            ///< granted: give it back with release()
    std::size_t held = 0;               ///< leases held fleet-wide, this one included
    std::size_t limit = 0;              ///< the fleet's limit for the host
    double rate = 0;                    ///< the fleet's rate for the host
    clock::duration paused_for{};       ///< refused: the host is paused this much longer
    clock::duration token_in{};         ///< refused: the fleet's next token is due then
};

/// The fleet store's client: the I/O half of the lease protocol (lease_book and
/// fleet_share are its sans-io half, the Lua scripts in lease_scripts its store half).
///
/// Runs one Redis connection on a thread of its own, so no worker ever waits on the
/// store but for its own round trips, and every worker's commands share one pipeline.
/// A granted lease is renewed while its request runs (lease_book), given back by
/// release(), and expires in the store after lease_ttl if this process dies. When the
/// store comes back after an outage, every lease still held here (those taken while it
/// was away too) is re-asserted; a lease the store had lost counts in
/// fleet_lease_lost_total.
///
/// Thread safety: every member may be called from any thread. `on_store_state` and
/// `on_held` run on the fleet thread.
class fleet_client {
public:
    struct callbacks {
        std::function<void(bool up)> on_store_state;
        /// An answer from the store said how many leases a host holds fleet-wide.
        std::function<void(const std::string& key, std::size_t held)> on_held;
    };

    fleet_client(const fleet_config& cfg, metrics& m, const logger& log, callbacks cb);
    ~fleet_client();
    fleet_client(const fleet_client&) = delete;
    fleet_client& operator=(const fleet_client&) = delete;

    /// Starts the fleet thread and waits, blocking the caller (start-up, before any
    /// listener accepts), until the store answers or fleet.timeout passes. True if up.
    bool start();
    /// Stops the thread; commands still waiting fail. Call once the workers have stopped.
    void stop();

    bool store_up() const;
    const fleet_config& config() const { return cfg_; }

    /// One round trip: a lease for `key`, or why not. Completes on the caller's executor
    /// within fleet.timeout; not cancellable (a grant that arrives is the caller's to release).
    task<lease_answer> acquire(const std::string& key, lease_terms terms);
    /// Gives a lease back (it goes out at once; nothing waits for the answer).
    void release(const std::string& key, std::uint64_t lease);
    /// A request that departs while the store is unreachable: held here, asserted in the
    /// store when it is back, released like any other.
    std::uint64_t hold_unasserted(const std::string& key);
    /// Shares this process's decision for `key` with the fleet: limit, rate, and a pause
    /// of `pause` from now (zero: none).
    void publish(const std::string& key, std::size_t limit, double rate, clock::duration pause);
    /// This process no longer waits for a lease of `key` (its queue head left).
    void withdraw(const std::string& key);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
    fleet_config cfg_;
};

}  // namespace fleet
}  // namespace politeproxy
