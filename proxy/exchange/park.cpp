#include "politeproxy/exchange/park.hpp"
#include "politeproxy/base/executor.hpp"

#include "politeproxy/http1/answers.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/server/proxy_context.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
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
task<void> client_gone(tcp_socket& client) {
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

}  // namespace

task<acquire_result> park(host_gates& gates, std::string key, std::string address, tcp_socket& client) {
    if (gates.fleet_needs_lease()) {  // most requests: one round trip to the store, no watch needed
        auto quick = co_await gates.acquire_leased_at_once(key, address);
        if (quick.granted) co_return quick;
    }
    auto result = co_await (gates.acquire(std::move(key), std::move(address)) || client_gone(client));
    if (result.index() == 1) co_return acquire_result{{}, errc::cancelled, {}};
    co_return std::move(std::get<0>(result));
}

task<acquire_result> park(host_gates& gates, std::string key, std::string address, event& gone) {
    if (gates.fleet_needs_lease()) {
        auto quick = co_await gates.acquire_leased_at_once(key, address);
        if (quick.granted) co_return quick;
    }
    auto result = co_await (gates.acquire(std::move(key), std::move(address)) || gone.wait());
    if (result.index() == 1) co_return acquire_result{{}, errc::cancelled, {}};
    co_return std::move(std::get<0>(result));
}

permit admit_at_once(proxy_context& ctx, const std::string& key, const std::string& address) {
    permit now = ctx.gates.try_acquire(key, address);
    if (now) ctx.metrics.queue_wait(clock::duration::zero());
    return now;
}

task<admission> admit(proxy_context& ctx, timed_socket& client, std::string key, std::string address,
                      answer_mode mode) {
    auto r = co_await park(ctx.gates, std::move(key), std::move(address), client.socket());
    if (r.ec == errc::cancelled) co_return admission{};  // the client left: nobody to answer
    if (r.ec) {
        const auto why = static_cast<errc>(r.ec.value());
        const std::string details = r.ec.message();
        const bool keep = co_await send_answer(ctx, client, why, details, mode, r.retry_after);
        co_return admission{{}, keep};
    }
    ctx.metrics.queue_wait(r.granted.queue_wait());
    co_return admission{std::move(r.granted), true};
}

}  // namespace politeproxy
