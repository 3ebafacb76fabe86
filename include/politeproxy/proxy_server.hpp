#pragma once
#include "politeproxy/config.hpp"
#include "politeproxy/log.hpp"

#include <memory>

namespace politeproxy {

/// The whole proxy process: binds the proxy and admin listeners, runs `workers` threads,
/// sweeps idle gates and pooled connections, and on SIGTERM/SIGINT stops accepting and
/// lets sessions finish for up to drain_timeout (a second signal stops at once).
class proxy_server {
public:
    proxy_server(std::shared_ptr<const config> cfg, logger log);
    /// Blocks until shut down. Returns the process exit code.
    int run();

private:
    std::shared_ptr<const config> cfg_;
    logger log_;
};

}  // namespace politeproxy
