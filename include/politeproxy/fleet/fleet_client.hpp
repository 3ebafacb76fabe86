#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/fleet/lease_scripts.hpp"

#include <boost/asio/io_context.hpp>

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
    /// This process's requests to the host under way, this one included (a busy host's
    /// leases are handed on from request to request).
    std::size_t in_flight = 0;
};

/// The fleet store's client: the I/O half of the lease protocol (lease_book and
/// fleet_share are its sans-io half, the Lua scripts in lease_scripts its store half).
///
/// One lane per worker loop: the store (redis_store: one Redis, a Redis Cluster, or the
/// master Sentinels name), the leases taken through it and their renewal timer, all on
/// that worker's thread, so a request's round trip never crosses threads (a hop each way
/// cost more CPU than the round trip itself).
///
/// Batches: the acquires of one host made in one event-loop turn go in one command, and
/// a lease given back waits up to 2 ms for the host's next acquire to carry it (a busy
/// host: one command per request instead of two). On one Redis (or Sentinel's master) an
/// acquire carries the leases of any host given back; on a cluster, its own host's (a
/// script's keys share a slot). A release no acquire carried within 2 ms goes with the
/// others of that moment in one command (a cluster: one per host).
///
/// Handovers: a host busy in this process (two requests or more under way) asks with its
/// leases for up to handover_spares spare tokens each, which the store grants when no
/// other process waits for the host and its bucket has them now. A lease given back with
/// spares left, within handover_life of its grant, goes to the process's next request of
/// the host without a round trip (one token spent); the tokens not spent go back to the
/// bucket with the lease. The bound is the store's (the lease is one slot throughout); a
/// spare token is counted when granted, so the fleet's rate runs ahead by at most
/// rate x handover_life, and a process that starts waiting for the host meanwhile waits
/// up to handover_life longer.
///
/// A granted lease is renewed while its request
/// runs (lease_book) and expires in the store after lease_ttl if this process dies. When
/// the store (a node of it) comes back after an outage, every lease still held (those
/// taken while it was away too) is re-asserted; a lease the store had lost counts in
/// fleet_lease_lost_total. The store counts as up while every lane's is (a cluster's:
/// every slot's master); a host's part of it may be up while the whole is not (up_for).
///
/// Thread safety: acquire() on a lane's loop; release(), hold_unasserted(), publish()
/// and withdraw() from any thread (they use the calling worker's lane, else the first).
/// `on_store_state` and `on_held` run on a lane's loop.
class fleet_client {
public:
    /// How long a lease given back waits for its host's next acquire to carry it.
    static constexpr clock::duration release_linger = std::chrono::milliseconds(2);
    /// Spare tokens asked per lease of a busy host: handovers per grant.
    static constexpr std::size_t handover_spares = 8;
    /// How long after its grant a lease may be handed on.
    static constexpr clock::duration handover_life = std::chrono::milliseconds(20);

    struct callbacks {
        /// The store, or a node of it, came or went (`up`: the whole store is up).
        std::function<void(bool up)> on_store_state;
        /// A renewal's answer said how many leases a host holds fleet-wide.
        std::function<void(const std::string& key, std::size_t held)> on_held;
    };

    fleet_client(const fleet_config& cfg, metrics& m, const logger& log, callbacks cb);
    ~fleet_client();
    fleet_client(const fleet_client&) = delete;
    fleet_client& operator=(const fleet_client&) = delete;

    /// A lane on `ioc` (a worker's loop). Before start().
    void add_lane(boost::asio::io_context& ioc);
    /// Connects every lane, running their loops on the calling thread (start-up: before
    /// any listener accepts, before the loops' own threads run) until the store answers
    /// on all of them or fleet.timeout passes. True if up.
    bool start();
    /// Closes the lanes; commands still waiting fail. Only once their loops have stopped.
    void stop();

    bool store_up() const;
    /// The store's node for `key` is reachable from every lane. From any thread.
    bool up_for(const std::string& key) const;
    const fleet_config& config() const { return cfg_; }

    /// One round trip on the calling worker's lane (with the host's other acquires of this
    /// turn): a lease for `key`, or why not. Within fleet.timeout; not cancellable (a
    /// grant that arrives is the caller's to release).
    task<lease_answer> acquire(const std::string& key, lease_terms terms);
    /// Gives a lease back: carried by an acquire within 2 ms, else sent with the others
    /// given back meanwhile; nothing waits for the answer.
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
