#pragma once
// What every exchange of a worker shares: the gates (which also hold the current config,
// see host_gates::current_config), the origin connections, the resolver, the counters.
// The referenced objects outlive every exchange (proxy_server owns them); the server's
// context (server/proxy_context.hpp) adds what only client connections need.
#include <string>

namespace politeproxy {

class host_gates;
class metrics;
class origin_pool;
class origin_sessions;
class parent_set;
class dns_resolver;
class logger;
namespace tls {
class client_side;
}

struct exchange_context {
    host_gates& gates;
    /// This worker's HTTP/1.1 keep-alive connections to origins.
    origin_pool& pool;
    politeproxy::metrics& metrics;
    dns_resolver& resolver;
    const logger& log;
    /// TLS towards HTTPS origins, shared by every worker.
    tls::client_side* origin_tls;
    /// This worker's HTTP/2 origin sessions.
    origin_sessions& h2_origins;
    /// The parent proxies and routes, shared by every worker.
    parent_set& parents;
    /// This instance's Via entry ("1.1 politeproxy-<id>"); seeing it come back is a loop.
    std::string via;
    /// The field line the proxy adds to every message it forwards: "Via: <via>\r\n".
    std::string via_line = "Via: " + via + "\r\n";
};

}  // namespace politeproxy
