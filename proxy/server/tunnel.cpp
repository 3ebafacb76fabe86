#include "politeproxy/server/tunnel.hpp"

#include "politeproxy/server/send_answer.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/http1/hop_by_hop.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/exchange/origin_open.hpp"
#include "politeproxy/exchange/parent_requests.hpp"
#include "politeproxy/exchange/route_choice.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>

#include <array>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr std::size_t tunnel_chunk_size = 16 * 1024;


// Both directions of one tunnel; all of it runs on the session's worker loop.
struct tunnel_state {
    timed_socket& client;
    timed_socket& origin;
    clock::time_point last_activity = clock::now();
};

// Copies until `from` reaches EOF, then half-closes `to`: the other direction goes on
// (a client may finish sending long before the response ends). An error ends both.
task<void> pump(tunnel_state& t, timed_socket& from, timed_socket& to) {
    std::array<char, tunnel_chunk_size> chunk;
    for (;;) {
        auto [rec, n] = co_await from.async_read_some(asio::buffer(chunk), use_tuple);
        if (rec == asio::error::eof) {
            boost::system::error_code ignored;
            to.socket().shutdown(tcp_socket::shutdown_send, ignored);
            co_return;
        }
        if (!rec) {
            t.last_activity = clock::now();
            auto [wec, m] = co_await asio::async_write(to, asio::buffer(chunk.data(), n), use_tuple);
            if (!wec) continue;
        }
        boost::system::error_code ignored;
        t.client.socket().close(ignored);
        t.origin.socket().close(ignored);
        co_return;
    }
}

// Ends the tunnel once neither direction has carried a byte for `idle`.
task<void> idle_watch(tunnel_state& t, clock::duration idle) {
    steady_timer timer(co_await asio::this_coro::executor);
    for (;;) {
        timer.expires_at(t.last_activity + idle);
        auto [ec] = co_await timer.async_wait(use_tuple);
        if (ec) co_return;
        if (clock::now() - t.last_activity >= idle) co_return;
    }
}

}  // namespace

const std::string_view connect_established =
    "HTTP/1.1 200 Connection established\r\nProxy-Status: politeproxy\r\n\r\n";

task<std::optional<connect_target>> run_tunnel(proxy_context& ctx, const config& cfg, timed_socket& client,
                                               beast::flat_buffer& buffer, request_header_parser& header,
                                               const connect_target& target, const std::shared_ptr<client_state>& who) {
    const std::string& key = target.key;
    const std::uint16_t port = target.port;
    if (via_contains(header.get(), ctx.via)) {
        co_await send_answer(ctx, client, errc::loop_detected, "this proxy's Via entry came back", {});
        co_return std::nullopt;
    }
    if (ctx.intercept && cfg.tls.intercepts(key)) {
        ctx.metrics.connect_served(connect_mode::intercepted);
        co_return target;
    }
    ctx.metrics.connect_served(connect_mode::tunneled);
    pinned_address pinned;  // key: ip, groups.ip
    if (admission_needs_address(cfg)) {
        auto chosen = pin_origin_address_at_once(cfg, ctx.resolver, key, port);
        if (!chosen) chosen = co_await pin_origin_address(cfg, ctx.resolver, key, port);
        if (auto* failure = std::get_if<connect_failure>(&*chosen)) {
            co_await send_answer(ctx, client, failure->why, failure->details, {});
            co_return std::nullopt;
        }
        pinned = std::move(std::get<0>(*chosen));
    }
    way via;  // routes: direct, or a parent's tunnel spliced to the client's
    if (!cfg.routes.empty()) {
        auto chosen = choose_way_at_once(ctx, cfg, key, target.address, port);
        if (!chosen) chosen = co_await choose_way(ctx, cfg, key, target.address, port);
        if (auto* no = std::get_if<failure>(&*chosen)) {
            co_await send_answer(ctx, client, no->why, no->details, {});
            co_return std::nullopt;
        }
        via = std::move(std::get<way>(*chosen));
        if (!via.all_down.empty()) {
            co_await send_answer(ctx, client, errc::parents_down, "every parent of the route is down", {},
                                 via.retry_after, via.all_down);
            co_return std::nullopt;
        }
    }
    std::string domain_key;  // key: domain
    const std::string& gate_key = ctx.gates.gate_key(cfg, key, pinned.text, domain_key);
    permit slot = admit_at_once(ctx, gate_key, pinned.text, who);
    if (!slot) {
        auto parked = co_await admit(ctx, gate_key, pinned.text, &client.socket(), who);
        if (!parked) {
            const refusal& no = parked.error();
            if (no.why != errc::cancelled) co_await send_answer(ctx, client, no.why, no.details, {}, no.retry_after);
            co_return std::nullopt;
        }
        slot = std::move(*parked);
    }
    exchange trip(ctx.metrics, ctx.log, std::move(slot), gate_key);  // the tunnel is one request
    const host_policy& policy = trip.policy();

    timed_socket origin(co_await asio::this_coro::executor);
    parent_turn turn;  // the parent carries the tunnel for as long as it is open
    std::string early;  // bytes a server-first protocol sent behind the parent's 200
    for (int attempt = 0;; ++attempt) {
        std::optional<parent_failure> failed;
        if (via.parent) {
            trip.through(via.parent.get(), true);
            if (!co_await via.parent->take(clock::now() + policy.queue.max_wait)) {
                trip.parent_busy();
                co_await send_answer(ctx, client, errc::queue_timeout, "no connection to the parent proxy within queue.max_wait",
                                     {}, std::chrono::seconds(1), trip.next_hop());
                co_return std::nullopt;
            }
            turn = parent_turn(via.parent);
            failed = co_await connect_through(ctx, cfg, origin, *via.parent,
                                              authority_of(pinned.address ? pinned.text : key, port),
                                              clock::now() + policy.timeouts.connect, &early);
        } else if (auto no = co_await connect_origin(cfg, ctx.resolver, origin, key, port, policy.timeouts.connect,
                                                     pinned.address)) {
            failed = parent_failure{std::move(*no), false};
        }
        if (!failed) break;
        if (failed->parents_own)
            trip.parent_failed(failed->why, failed->details);
        else
            trip.connect_failed(failed->why);
        // A parent that failed itself: another usable way of the route (as forward_to_origin).
        if (failed->parents_own && attempt + 1 < ways_per_request &&
            co_await next_way(ctx, cfg, key, target.address, port, failed->why, via, turn)) {
            trip.through(nullptr, false);
            origin = timed_socket(co_await asio::this_coro::executor);
            continue;
        }
        co_await send_answer(ctx, client, failed->why, failed->details, {}, {}, trip.next_hop());
        co_return std::nullopt;
    }
    connection_tracker tracked(ctx.metrics, connection_side::origin, connection_protocol::tunnel);
    client.expires_after(policy.timeouts.idle);
    std::string established(connect_established);
    if (via.parent) established.insert(established.size() - 4, "; next-hop=\"" + via.parent->name() + "\"");
    established += early;  // a server-first protocol's first bytes, come with the parent's 200
    if (auto [ec, n] = co_await asio::async_write(client, asio::buffer(established), use_tuple); ec) co_return std::nullopt;
    client.expires_never();
    // Bytes the client sent right behind its CONNECT (an eager TLS ClientHello).
    if (buffer.size() > 0) {
        origin.expires_after(policy.timeouts.idle);
        if (auto [ec, n] = co_await asio::async_write(origin, buffer.data(), use_tuple); ec) co_return std::nullopt;
        buffer.consume(buffer.size());
    }
    trip.tunnel_opened();

    // Through the timed_sockets, with no deadline (idle_watch ends a quiet tunnel; the
    // client's was cleared above): a read after one that emptied the socket is checked
    // as timed_socket checks it.
    origin.expires_never();
    tunnel_state t{client, origin};
    co_await ((pump(t, t.client, t.origin) && pump(t, t.origin, t.client)) || idle_watch(t, policy.timeouts.idle));
    co_return std::nullopt;
}

}  // namespace politeproxy
