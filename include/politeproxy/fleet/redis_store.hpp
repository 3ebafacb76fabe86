#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/fleet/redis_connection.hpp"

#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

class logger;

namespace fleet {

/// Where the fleet's commands go, as fleet.redis names it: one Redis, a Redis Cluster, or
/// the master a set of Sentinels names. Owned by one io_context (a worker's loop), like
/// the connections it holds.
///
/// - single: one redis_connection.
/// - cluster (cluster_store): one connection per master, the slot map from CLUSTER SLOTS
///   (refreshed on MOVED and every few seconds, every second while a node is down); a
///   command goes to its key's slot's master, follows MOVED (the map is updated) and ASK
///   (ASKING first, this command only) up to 5 times, and asks again on TRYAGAIN and
///   CLUSTERDOWN (10 ms doubling) until `timeout`. A slot whose master is unreachable, or
///   that a node called unserved, is down: its keys fail at once; the others' do not.
/// - sentinel (sentinel_store): one connection to the master, found by asking the
///   Sentinels in turn (SENTINEL get-master-addr-by-name) and followed when one announces
///   +switch-master, or when the master is lost or turns out to be a replica (ROLE after
///   each connect; READONLY): then asked again every 250 ms until the answer works.
///
/// `on_state(came_up)` runs on the loop when reachability changed (came_up: some node
/// is reachable that was not, so what was held there is re-asserted).
///
/// Thread safety: up() and up_for() from any thread; send() from any thread (from
/// another thread it is posted); the rest on the loop, start() before it runs.
class redis_store {
public:
    using handler = redis_connection::handler;

    virtual ~redis_store() = default;
    /// Starts connecting (and reconnecting until closed).
    virtual void start() = 0;
    /// Closes every connection and fails every command waiting on one (a cluster's
    /// commands waiting to be retried are dropped with the loop's handlers). Only while
    /// no thread runs the io_context.
    virtual void close_now() = 0;
    /// Every node the store needs is reachable (a cluster: every slot's master).
    virtual bool up() const = 0;
    /// The node serving `key`'s slot is reachable (one Redis, Sentinel: up()).
    virtual bool up_for(std::uint16_t slot) const = 0;
    /// Sends `command`, whose keys share `slot`, to the node that serves it; `done` runs
    /// on the loop with the reply (redirections followed) or errc::fleet_unavailable.
    virtual void send(std::uint16_t slot, std::string command, handler done) = 0;
};

/// The store fleet.redis names, on `ioc`. `setup` (e.g. SCRIPT LOAD) is sent on every
/// data connection after it connects.
std::unique_ptr<redis_store> make_redis_store(boost::asio::io_context& ioc, const fleet_config& cfg, const logger& log,
                                              std::vector<std::string> setup, std::function<void(bool came_up)> on_state);

/// Defined in cluster_store.cpp and sentinel_store.cpp.
std::unique_ptr<redis_store> make_cluster_store(boost::asio::io_context& ioc, const fleet_config& cfg, const logger& log,
                                                std::vector<std::string> setup, std::function<void(bool)> on_state);
std::unique_ptr<redis_store> make_sentinel_store(boost::asio::io_context& ioc, const fleet_config& cfg, const logger& log,
                                                 std::vector<std::string> setup, std::function<void(bool)> on_state);

}  // namespace fleet
}  // namespace politeproxy
