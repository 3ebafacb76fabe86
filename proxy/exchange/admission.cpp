#include "politeproxy/exchange/admission.hpp"

#include "politeproxy/base/event.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

namespace politeproxy {
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

// How often a parked request whose client has bytes waiting looks for the client's FIN.
constexpr auto close_poll_interval = std::chrono::milliseconds(250);

// Whether the peer has closed (FIN: CLOSE_WAIT) or reset (CLOSE) the connection, whatever
// bytes wait unread in front of that.
bool peer_closed(tcp_socket& client) {
    ::tcp_info info{};
    ::socklen_t size = sizeof info;
    if (::getsockopt(client.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return true;
    return info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_CLOSE;
}

// Completes when the client has gone, or when cancelled.
task<void> socket_closed(tcp_socket& client) {
    auto [ec] = co_await client.async_wait(tcp_socket::wait_read, use_tuple);
    if (ec) co_return;
    char byte;
    const ssize_t n = ::recv(client.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) co_return;
    // Bytes are waiting (a body, a pipelined request, or inside TLS a close_notify): the
    // socket stays readable, so readiness tells nothing more. A FIN or reset behind them
    // still changes the TCP state: look at it now and then.
    steady_timer poll(client.get_executor());
    while (!peer_closed(client)) {
        poll.expires_after(close_poll_interval);
        if (auto [cancelled] = co_await poll.async_wait(use_tuple); cancelled) co_return;
    }
}

// Completes when the watch says the client went (or when cancelled).
task<void> client_left(client_watch watch) {
    if (auto* socket = std::get_if<tcp_socket*>(&watch)) return socket_closed(**socket);
    return std::get<event*>(watch)->until_set();
}

// The gate's answer, or errc::cancelled once the watch says the client went.
task<acquire_result> park(host_gates& gates, std::string key, std::string address, client_watch watch,
                          std::shared_ptr<client_state> client) {
    if (gates.fleet_needs_lease(key)) {  // most requests: one round trip to the store, no watch needed
        auto quick = co_await gates.acquire_leased_at_once(key, address, client);
        if (quick.granted) co_return quick;
    }
    if (std::holds_alternative<std::monostate>(watch))  // nobody to watch (a robots.txt fetch)
        co_return co_await gates.acquire(std::move(key), std::move(address), std::move(client));
    auto result = co_await (gates.acquire(std::move(key), std::move(address), std::move(client)) || client_left(watch));
    if (result.index() == 1) co_return acquire_result{{}, errc::cancelled, {}};
    co_return std::move(std::get<0>(result));
}

}  // namespace

permit admit_at_once(exchange_context& ctx, const std::string& key, const std::string& address,
                     const std::shared_ptr<client_state>& client) {
    permit now = ctx.gates.try_acquire(key, address, client);
    if (now) ctx.metrics.queue_wait(clock::duration::zero());
    return now;
}

task<admitted> admit(exchange_context& ctx, std::string key, std::string address, client_watch watch,
                     std::shared_ptr<client_state> client) {
    auto r = co_await park(ctx.gates, std::move(key), std::move(address), watch, std::move(client));
    if (r.ec)
        co_return admitted(boost::system::in_place_error,
                           refusal{static_cast<errc>(r.ec.value()), r.ec.message(), r.retry_after});
    ctx.metrics.queue_wait(r.granted.queue_wait());
    co_return std::move(r.granted);
}

}  // namespace politeproxy
