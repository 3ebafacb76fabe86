#include "politeproxy/server/client_session.hpp"
#include "politeproxy/base/executor.hpp"

#include "politeproxy/policy/address_filter.hpp"
#include "politeproxy/http1/answers.hpp"
#include "politeproxy/http1/forward.hpp"
#include "politeproxy/server/tunnel.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/admin/metrics.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/http1/request_head.hpp"
#include "politeproxy/server/session_set.hpp"

#include <boost/asio/this_coro.hpp>

#include <array>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto lingering_close = std::chrono::seconds(2);

bool client_allowed(const config& cfg, const tcp::endpoint& peer) {
    return any_contains(cfg.security.allow_clients, bytes_of(peer.address()));
}

// Closing with unread request bytes makes the kernel send a reset that can destroy the
// answer just written; half-close first and drain briefly (RFC 9112 section 9.6).
task<void> close_gracefully(timed_socket& client) {
    boost::system::error_code ec;
    client.socket().shutdown(tcp_socket::shutdown_send, ec);
    if (ec) co_return;
    client.expires_after(lingering_close);
    std::array<char, 4096> sink;
    for (;;) {
        auto [rec, n] = co_await client.async_read_some(asio::buffer(sink), use_tuple);
        if (rec) break;
    }
}

}  // namespace

task<void> run_client_session(proxy_context& ctx, tcp_socket socket) {
    connection_tracker tracked(ctx.metrics, connection_side::client, connection_protocol::http1);
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    const auto peer = socket.remote_endpoint(ec);
    if (ec) co_return;
    const bool allowed = client_allowed(*ctx.gates.current_config(), peer);
    timed_socket client(std::move(socket));
    // A request that stalls is answered 408; any other timeout then ends in the
    // lingering close below, as an error does.
    client.keep_open_on_timeout();
    beast::flat_buffer buffer;
    session_set::registration registered(ctx.sessions,
                                         ctx.sessions.add(co_await asio::this_coro::executor, client));

    for (;;) {
        if (ctx.draining) break;
        const auto cfg = ctx.gates.current_config();
        field_arena arena(ctx.field_blocks);  // this request's header fields, freed as one
        request_header_parser header(std::piecewise_construct, std::make_tuple(), std::make_tuple(arena.allocator()));
        header.header_limit(static_cast<std::uint32_t>(cfg->limits.request_header_bytes));
        header.body_limit(boost::none);
        client.expires_after(cfg->defaults.timeouts.idle);
        registered.get().idle = buffer.size() == 0;  // a drain may close us while we wait
        const auto rec = co_await read_header(client, buffer, header);
        registered.get().idle = false;
        if (rec == beast::error::timeout && header.got_some()) {
            co_await send_answer(ctx, client, errc::request_timeout, "the request header stalled for timeouts.idle", {});
            break;
        }
        if (rec == http::error::end_of_stream || rec == beast::error::timeout ||
            rec == asio::error::connection_reset || rec == asio::error::operation_aborted)
            co_return;
        bool keep = false;
        if (rec) {
            const std::string_view seen(static_cast<const char*>(buffer.data().data()), buffer.size());
            const auto refusal = refuse_unparsed_head(rec, seen, cfg->limits);
            co_await send_answer(ctx, client, refusal.why, refusal.details, {});
        } else if (!allowed) {
            const std::string details = "client " + peer.address().to_string() + " is not in security.allow_clients";
            co_await send_answer(ctx, client, errc::client_denied, details, {});
        } else if (const auto verdict = check_request_head(header.get(), cfg->limits); verdict.refusal) {
            co_await send_answer(ctx, client, *verdict.refusal, verdict.details, {});
        } else if (verdict.answer_options) {  // a body it had stays unread: then close
            keep = co_await send_options_answer(ctx, client, header.get().keep_alive() && !verdict.has_body());
        } else if (header.get().method() == http::verb::connect) {
            co_await run_tunnel(ctx, *cfg, client, buffer, header);
            break;  // a refusal must still reach the client (see close_gracefully)
        } else {
            keep = co_await forward_request(ctx, *cfg, client, buffer, header, verdict);
        }
        if (!keep) break;
    }
    co_await close_gracefully(client);
}

}  // namespace politeproxy
