#include "politeproxy/client_session.hpp"

#include "politeproxy/address_filter.hpp"
#include "politeproxy/forward.hpp"
#include "politeproxy/host_gates.hpp"
#include "politeproxy/metrics.hpp"
#include "politeproxy/session_set.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>

#include <array>
#include <cstring>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t request_header_limit = 64 * 1024;
constexpr auto lingering_close = std::chrono::seconds(2);

bool client_allowed(const config& cfg, const tcp::endpoint& peer) {
    const auto a = peer.address();
    ip_bytes b{};
    if (a.is_v4()) {
        b = ipv4_bytes(a.to_v4().to_uint());
    } else {
        const auto v6 = a.to_v6().to_bytes();
        std::memcpy(b.data(), v6.data(), b.size());
    }
    return any_contains(cfg.security.allow_clients, b);
}

// Closing with unread request bytes makes the kernel send a reset that can destroy the
// answer just written; half-close first and drain briefly (RFC 9112 section 9.6).
asio::awaitable<void> close_gracefully(beast::tcp_stream& client) {
    boost::system::error_code ec;
    client.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) co_return;
    client.expires_after(lingering_close);
    std::array<char, 4096> sink;
    for (;;) {
        auto [rec, n] = co_await client.async_read_some(asio::buffer(sink), use_tuple);
        if (rec) break;
    }
}

}  // namespace

asio::awaitable<void> run_client_session(proxy_context& ctx, tcp::socket socket) {
    connection_tracker tracked(ctx.metrics, connection_side::client, "http1");
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    const auto peer = socket.remote_endpoint(ec);
    if (ec) co_return;
    const bool allowed = client_allowed(*ctx.gates.current_config(), peer);
    beast::tcp_stream client(std::move(socket));
    beast::flat_buffer buffer;
    session_set::registration registered(ctx.sessions,
                                         ctx.sessions.add(co_await asio::this_coro::executor, client));

    for (;;) {
        if (ctx.draining) break;
        request_header_parser header;
        header.header_limit(request_header_limit);
        header.body_limit(boost::none);
        client.expires_after(ctx.gates.current_config()->defaults.timeouts.idle);
        registered.get().idle = buffer.size() == 0;  // a drain may close us while we wait
        auto [rec, n] = co_await http::async_read_header(client, buffer, header, use_tuple);
        registered.get().idle = false;
        if (rec == http::error::end_of_stream || rec == beast::error::timeout || rec == asio::error::eof ||
            rec == asio::error::connection_reset || rec == asio::error::operation_aborted)
            co_return;
        bool keep = false;
        if (rec == http::error::header_limit) {
            co_await send_answer(ctx, client, errc::header_too_large, "request header section exceeds 64 KiB", false);
        } else if (rec) {
            co_await send_answer(ctx, client, errc::bad_request, "malformed request: " + rec.message(), false);
        } else if (!allowed) {
            co_await send_answer(ctx, client, errc::client_denied,
                                 "client " + peer.address().to_string() + " is not in security.allow_clients", false);
        } else if (header.get().method() == http::verb::connect) {
            co_await run_tunnel(ctx, client, buffer, header);
            co_return;
        } else {
            keep = co_await forward_request(ctx, client, buffer, header);
        }
        if (!keep) break;
    }
    co_await close_gracefully(client);
}

}  // namespace politeproxy
