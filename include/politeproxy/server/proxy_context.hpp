#pragma once
#include "politeproxy/exchange/exchange_context.hpp"

#include <atomic>
#include <memory_resource>

namespace politeproxy {

class password_checks;
class session_set;
namespace tls {
class server_side;
}

/// What every client session of a worker shares: what its exchanges share, and what only
/// client connections need. The referenced objects outlive every session (proxy_server
/// owns them).
struct proxy_context : exchange_context {
    /// Set on SIGTERM/SIGINT: finish the request in hand, then close.
    const std::atomic<bool>& draining;
    session_set& sessions;
    /// Where this worker's field arenas take their blocks (see field_arena); used only
    /// on the worker's own thread.
    std::pmr::memory_resource& field_blocks;
    /// TLS towards intercepted clients (null unless tls.mode is intercept), shared by
    /// every worker.
    tls::server_side* intercept;
    /// Password hashing for new proxy credentials, off the workers' threads.
    password_checks& passwords;
};

}  // namespace politeproxy
