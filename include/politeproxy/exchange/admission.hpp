#pragma once
// One admission for every request that goes to an origin: forwarded requests of either
// client protocol, CONNECT tunnels and robots.txt fetches. It grants a permit (the
// host's slot and token, its groups' slots, the fleet's lease, past a robots.txt hold)
// or says why not; it never answers the client: each client adapter words a refusal in
// its own protocol.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/permit.hpp"

#include <boost/system/result.hpp>

#include <memory>

#include <optional>
#include <string>
#include <variant>

namespace politeproxy {

class event;
class client_state;
struct exchange_context;

/// A permit, or why not.
using admitted = boost::system::result<permit, refusal>;

/// What tells that a parked request's client went away, so that it leaves the queue and
/// is granted nothing: its HTTP/1.1 connection (closed or reset), its HTTP/2 stream's
/// event (the stream was reset, the connection closed), or nothing (a robots.txt fetch,
/// which the proxy makes itself).
///
/// Watching a socket reads only with MSG_PEEK, so a request body stays in it. Once the
/// client has sent bytes beyond the header (a body, a pipelined request, a TLS
/// close_notify), readiness cannot show a close behind them: the watch then looks at the
/// TCP state every 250 ms (a FIN or a reset is seen within that). A client that
/// half-closes (shutdown(SHUT_WR)) after its request counts as gone, as with Squid's
/// default half_closed_clients off and HAProxy's abortonclose.
using client_watch = std::variant<std::monostate, tcp_socket*, event*>;

/// A permit at once when the request would not wait at all (most do), without the
/// parking machinery (the client watch costs a coroutine pair and epoll changes) or a
/// coroutine frame; empty otherwise: then admit().
/// `address` (groups.ip): the address the request connects to; empty: none. `client`:
/// whose request (clients:, exchange/client_book.hpp); null: nobody's.
permit admit_at_once(exchange_context& ctx, const std::string& key, const std::string& address,
                     const std::shared_ptr<client_state>& client = {});

/// Parks the request at its host's gate until it is granted, refused or its client goes.
/// With a fleet store, a request first tries for its lease in one round trip without the
/// watch (host_gates::acquire_leased_at_once); it parks only if the fleet refuses.
task<admitted> admit(exchange_context& ctx, std::string key, std::string address, client_watch watch,
                     std::shared_ptr<client_state> client = {});

}  // namespace politeproxy
