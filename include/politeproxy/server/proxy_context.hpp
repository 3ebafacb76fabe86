#pragma once
#include "politeproxy/config/config.hpp"

#include <atomic>
#include <memory>
#include <memory_resource>
#include <string>

namespace politeproxy {

class host_gates;
class metrics;
class origin_pool;
class origin_sessions;
class password_checks;
class session_set;
class dns_resolver;
class logger;
namespace tls {
class server_side;
class client_side;
}  // namespace tls

/// What every client session shares: the gates (which also hold the current config,
/// see host_gates::current_config), the origin pool, metrics. The referenced objects
/// outlive every session (proxy_server owns them).
struct proxy_context {
    host_gates& gates;
    origin_pool& pool;
    politeproxy::metrics& metrics;
    /// This instance's Via entry ("1.1 politeproxy-<id>"); seeing it come back is a loop.
    std::string via;
    /// Set on SIGTERM/SIGINT: finish the request in hand, then close.
    const std::atomic<bool>& draining;
    session_set& sessions;
    dns_resolver& resolver;
    const logger& log;
    /// Where this worker's field arenas take their blocks (see field_arena); used only
    /// on the worker's own thread.
    std::pmr::memory_resource& field_blocks;
    /// TLS towards intercepted clients (null unless tls.mode is intercept) and towards
    /// HTTPS origins; both shared by every worker.
    tls::server_side* intercept;
    tls::client_side* origin_tls;
    /// This worker's HTTP/2 origin sessions.
    origin_sessions& h2_origins;
    /// Password hashing for new proxy credentials, off the workers' threads.
    password_checks& passwords;
    /// The field line the proxy adds to every message it forwards: "Via: <via>\r\n"
    /// (last, so the positional initialisation above leaves it to its default).
    std::string via_line = "Via: " + via + "\r\n";
};

}  // namespace politeproxy
