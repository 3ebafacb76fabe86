#pragma once
#include "politeproxy/base/executor.hpp"
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <string>

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
};

/// Serves GET /metrics (Prometheus text format), /hosts (JSON, see hosts_view.hpp),
/// /healthz, /readyz, the status page (/ and /status.js, see status_page.hpp) and the
/// control API (/api/..., admin_api.hpp) until the acceptor is closed.
task<void> run_admin_listener(tcp_acceptor& acceptor, admin_view view);

}  // namespace politeproxy
