#pragma once
#include "politeproxy/clock.hpp"
#include "politeproxy/config.hpp"
#include "politeproxy/gate.hpp"
#include "politeproxy/outcome.hpp"
#include "politeproxy/permit.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace politeproxy {

/// The state kept for one host key while it is tracked.
struct host_entry {
    host_entry(std::string k, std::shared_ptr<const host_policy> p, clock::time_point now);

    const std::string key;
    std::shared_ptr<const host_policy> policy;  ///< aliases the config it came from
    gate g;
    std::array<std::uint64_t, outcome_count> outcomes{};
    clock::time_point last_used;
    const std::size_t shard;
};

/// What one tracked host looks like to the metrics and status views.
struct host_snapshot {
    std::string key;
    std::size_t in_flight = 0;
    std::size_t waiting = 0;
    std::size_t limit = 0;
    double rate = 0;
    std::array<std::uint64_t, outcome_count> outcomes{};
};

struct acquire_result {
    permit granted;                ///< empty unless ec is clear
    boost::system::error_code ec;  ///< errc::queue_full, queue_timeout or cancelled
    clock::duration retry_after{};  ///< a hint for the 503
};

/// Every host's gate, created on first use and evicted when idle, and the asynchronous
/// acquire that parks a request until its gate grants it a slot and a token.
///
/// A parked request waits on a timer it owns (its deadline, or its token's due time);
/// the gate wakes it by posting to the request's own executor. Cancelling the acquire
/// (the client went away, shutdown) takes the waiter out of the queue and grants nothing;
/// if it already held a slot, the slot passes to the next waiter.
///
/// Locking: entries are sharded by key; each shard's mutex guards its map and every gate
/// in it. No lock is held across a suspension point or while posting wake-ups.
class host_gates {
public:
    explicit host_gates(std::shared_ptr<const config> cfg);
    host_gates(const host_gates&) = delete;
    host_gates& operator=(const host_gates&) = delete;

    /// Parks until granted, the host's queue.max_wait passes, or the operation is cancelled.
    boost::asio::awaitable<acquire_result> acquire(std::string key);

    /// Forgets gates idle (see gate::idle) for at least `idle_for`. Returns how many.
    std::size_t evict_idle(clock::time_point now, clock::duration idle_for);

    std::size_t size() const;
    std::vector<host_snapshot> snapshot() const;
    std::shared_ptr<const config> current_config() const;

private:
    friend class permit;
    struct shard {
        mutable std::mutex mutex;
        std::unordered_map<std::string, std::shared_ptr<host_entry>> entries;
    };
    static constexpr std::size_t shard_count = 16;

    std::shared_ptr<host_entry> find_or_create(shard& s, const std::string& key, clock::time_point now);
    void release(host_entry& entry, outcome how);
    void cancel(host_entry& entry, gate::waiter& w);

    std::shared_ptr<const config> config_;
    std::array<shard, shard_count> shards_;
};

}  // namespace politeproxy
