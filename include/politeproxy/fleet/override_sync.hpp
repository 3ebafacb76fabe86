#pragma once
#include "politeproxy/config/config.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace politeproxy {

class logger;

namespace fleet {

/// Per-host live overrides shared by a fleet of processes through the store. An override
/// is opaque here: a host key, a value (JSON text) and an optional TTL. What one process
/// puts or removes reaches every process's on_change, its own included, within one poll
/// period (250 ms) plus a round trip while the store is up. A change may be told more
/// than once (its own echo, a re-read after a store loss): the caller applies it
/// idempotently, and expires an override itself at the end of its TTL (an expiry is not
/// announced; a process that starts after it simply does not read the override).
///
/// Algorithm: a change is one Lua script: INCR a version, SET (with PX) or DEL the value,
/// and score the host key with that version in a sorted set of changes (a host changed
/// again moves up). Each process reads the version every 250 ms; when it moved past the
/// last one read, it pages through the hosts scored above (30 a page, under the reply
/// reader's bound) and GETs their values, pipelined: a missing value tells nullopt. It
/// starts from version 0: a process that joins late reads every override.
/// The first change after the store lost everything (restart, FLUSHALL) stamps it with a
/// new epoch (the store's TIME). A process that finds another epoch, or a version below
/// the one it read, puts again what callbacks.known() returns and reads everything from
/// the start. Every process does so: the same values put several times, harmless.
/// A change the store did not take (unreachable, or refused) waits here, the latest per
/// host key with its TTL kept as a deadline, and is sent again when the connection next
/// comes up (a removal could not be re-published from known(), which holds no removals).
///
/// Limits: a host removed while the store was down may come back when the store also
/// lost its data and a process that still held it re-publishes it after the removal.
/// The sorted set keeps one member per host ever changed (removed ones too), read once by
/// each process that starts. A store that evicts keys (maxmemory) loses overrides
/// silently. Every key carries the hash tag {pp:overrides}: on Redis Cluster they live in
/// one slot, on one node (a node lost: overrides wait for it, the leases of hosts on
/// other nodes do not).
///
/// Locking: none. The poll, the replies and the waiting changes live on the io_context's
/// thread; put() and remove() only hand a command to the connection, which posts it there.
///
/// Thread safety: put() and remove() from any thread, also before start() (the change
/// waits for the connection); on_change and known() are called on the io_context's
/// thread; start() before the io_context runs or on its thread; stop() only once it no
/// longer runs. Cancellation: stop() closes the connection and ends the polling; changes
/// the store has not taken are dropped.
class override_sync {
public:
    struct entry {
        std::string key;
        std::string value;
        std::optional<std::chrono::milliseconds> ttl;  ///< what is left of it
    };
    struct callbacks {
        /// A host's override changed: its value, or nullopt (removed or expired).
        std::function<void(const std::string& key, std::optional<std::string> value)> on_change;
        /// What this process holds (unexpired), to put again after the store lost it.
        std::function<std::vector<entry>()> known;
    };

    override_sync(boost::asio::io_context& ioc, const fleet_config& cfg, const logger& log, callbacks cb);
    ~override_sync();
    override_sync(const override_sync&) = delete;
    override_sync& operator=(const override_sync&) = delete;

    /// Connects and polls until stop().
    void start();
    /// Only once the io_context no longer runs (like fleet_client::stop). Destroy this
    /// object only after that io_context stopped for good.
    void stop();

    /// A TTL of zero or less is a removal.
    void put(const std::string& key, const std::string& value, std::optional<std::chrono::milliseconds> ttl);
    void remove(const std::string& key);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace fleet
}  // namespace politeproxy
