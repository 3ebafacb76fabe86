#pragma once
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/base/log.hpp"

#include <memory>
#include <string>

namespace politeproxy {

class host_gates;
class parent_set;
class metrics;

/// The whole proxy process: binds the proxy and admin listeners, runs `workers` threads,
/// sweeps idle gates and pooled connections. SIGHUP reloads `config_path` (an invalid
/// file is logged and the running config stays). SIGTERM/SIGINT drain: stop accepting,
/// answer parked requests 503, close idle keep-alive connections, let requests in flight
/// finish for up to drain_timeout, then exit 0; a second signal stops at once.
class proxy_server {
public:
    proxy_server(std::string config_path, std::shared_ptr<const config> cfg, logger log);
    /// Blocks until shut down. Returns the process exit code.
    int run();

private:
    /// A reloaded config (read off the workers) replaces the running one (true: the
    /// caller then reapplies it to the tracked hosts, host_gates::reapply_config), or is refused.
    bool apply_reload(host_gates& gates, parent_set& parents, metrics& m, loaded<config> loaded);

    std::string config_path_;
    std::shared_ptr<const config> cfg_;
    logger log_;
};

}  // namespace politeproxy
