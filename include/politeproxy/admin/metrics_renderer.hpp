#pragma once
// The Prometheus text exposition (GET /metrics): what the counter sink (base/metrics.hpp)
// counted, and the per-host series read from the gates at scrape time.
#include "politeproxy/admin/series_cap.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace politeproxy {

class host_gates;
class metrics;
class parent_set;
struct live_override;

class metrics_renderer {
public:
    /// A host's gate was evicted with these counts (they stay in host="_other" when the
    /// host had no series of its own: see host_series). Called under a gate's lock.
    void host_evicted(const std::string& key, const host_counts& final) { series_.evicted(key, final); }
    /// The same for a client (clients:) forgotten while idle (client="_other").
    void client_evicted(const std::string& name, const client_counts& final) { client_series_.evicted(name, final); }

    /// Everything `counted` holds, per-host series from `gates`, per-parent series from
    /// `parents`; `idle_origin_connections` (pooled) count as open upstream connections;
    /// `api_overrides` (the control API's) beside the registry's in host_override_info.
    std::string render(const metrics& counted, const host_gates& gates, const parent_set& parents,
                       std::size_t idle_origin_connections,
                       const std::vector<std::shared_ptr<const live_override>>& api_overrides = {});

private:
    host_series series_;  ///< who has per-host series of their own
    client_series client_series_;  ///< who has per-client series of their own
};

}  // namespace politeproxy
