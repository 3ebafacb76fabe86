#pragma once
#include "politeproxy/base/executor.hpp"
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <string>

namespace boost::asio {
class thread_pool;
}

namespace politeproxy {

class dns_resolver;
class host_gates;
class live_overrides;
class parent_set;
class metrics;
class metrics_renderer;

/// The admin listener's view of the proxy.
struct admin_view {
    const host_gates& gates;
    live_overrides& overrides;  ///< the control API's (admin_api.hpp)
    const parent_set& parents;  ///< /hosts (each host's route), /metrics (parent_*)
    const politeproxy::metrics& metrics;
    metrics_renderer& renderer;  ///< GET /metrics
    std::function<std::size_t()> idle_origin_connections;
    std::function<bool()> ready;  ///< listening and configured
    std::function<const char*()> fleet_store;  ///< "up" or "down"; null without a fleet
    const dns_resolver* names = nullptr;       ///< /hosts: each key's cached addresses
    /// Where the answers that read every tracked host are built (about half a second
    /// and more at a million hosts), so the loop the listener shares keeps serving; after
    /// one, the memory it used is given back to the system there (base/free_heap.hpp).
    /// One thread each: a scrape never waits behind the status page's /hosts (asked each
    /// second), and scrapes never overlap. Null: on the listener's loop. Each must be
    /// stopped and joined before anything the view refers to goes.
    boost::asio::thread_pool* metrics_thread = nullptr;  ///< GET /metrics
    boost::asio::thread_pool* views_thread = nullptr;    ///< GET /hosts, /api/hosts (the list)
};

/// Serves GET /metrics (Prometheus text format), /hosts (JSON, see hosts_view.hpp),
/// /healthz, /readyz, the status page (/ and /status.js, see status_page.hpp) and the
/// control API (/api/..., admin_api.hpp) until the acceptor is closed.
task<void> run_admin_listener(tcp_acceptor& acceptor, admin_view view);

}  // namespace politeproxy
