#pragma once
#include "politeproxy/config.hpp"

#include <memory>
#include <string>

namespace politeproxy {

class host_gates;
class metrics;
class origin_pool;

/// What every client session shares: the config, the gates, the origin pool, metrics.
/// The referenced objects outlive every session (proxy_server owns them).
struct proxy_context {
    std::shared_ptr<const config> cfg;
    host_gates& gates;
    origin_pool& pool;
    politeproxy::metrics& metrics;
    /// This instance's Via entry ("1.1 politeproxy-<id>"); seeing it come back is a loop.
    std::string via;
};

}  // namespace politeproxy
