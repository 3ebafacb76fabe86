#pragma once
// The exchange: one request's trip from its admission to the origin's last byte, the same
// wherever it came from. The loop check, the address pinned (when the gate counts by
// address), robots.txt, a slot at the host's gate (exchange/admission); then, for each
// attempt, an origin transport picked (exchange/origin_transport.hpp) and its forward()
// awaited: a stream on an HTTP/2 session (exchange/h2_origin_stream.hpp), a pooled HTTP/1.1
// connection, or a new connection (exchange/origin_open) spoken to in HTTP/1.1
// (exchange/h1_origin_transport.hpp) or HTTP/2, as the host's `upstream` and the origin's ALPN
// say. A transport that leaves the request unprocessed (`again`) gets a new connection
// or session. Every step is reported to the request's exchange (exchange/exchange).
//
// A template over the client's side (`Client`, moved into the coroutine: the
// interface is exchange/client_side.hpp, which says why it has the methods it has), so
// each client protocol brings only its adapter (server/h1_client_side.cpp,
// server/h2_connection_parts.hpp) and the HTTP/1.1 path pays no indirection.
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/exchange/client_side.hpp"
#include "politeproxy/exchange/origin_transport.hpp"
#include "politeproxy/exchange/h1_origin_transport.hpp"
#include "politeproxy/exchange/h2_origin_stream.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/exchange/robots_check.hpp"
#include "politeproxy/exchange/h2_origin_session.hpp"
#include "politeproxy/exchange/origin_open.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/origin_pool.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/route_choice.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

namespace forwarding {

/// Attempts a request makes when origins leave it unprocessed (`again`): a reused HTTP/1.1
/// connection the origin closed meanwhile, a stream above an HTTP/2 GOAWAY's last stream
/// (then on a new session), or REFUSED_STREAM (the session may still take it later).
inline constexpr int max_attempts = 3;

/// RFC 9110 section 9.2.2: only these may be sent again without the client asking.
inline bool idempotent(boost::beast::http::verb m) {
    using boost::beast::http::verb;
    return m == verb::get || m == verb::head || m == verb::options || m == verb::trace || m == verb::put ||
           m == verb::delete_;
}

/// The origin's pool key, "[https:]host:port", into `out`.
void pool_key_of(const origin_target& target, std::string& out);

/// The pool key of a connection that goes through `parent` (exchange/parent_set.hpp):
/// for http the parent's own (any destination rides it), for https the origin's key and
/// the parent's name (a tunnel to that origin through that parent); `pinned`: its address.
void pool_key_through(const parent_state& parent, const origin_target& target, std::string_view pinned,
                      std::string& out);

}  // namespace forwarding

/// Forwards the request to `target`, whose destination the entry judged (where the deny
/// list needs no DNS; an address DNS gives is judged when connecting); answers the client
/// exactly once. True: the client connection goes on.
template <client_side Client>
task<bool> forward_to_origin(exchange_context& ctx, const config& cfg, Client down, const origin_target& target) {
    if (down.via_loop(ctx.via)) co_return co_await down.answer(errc::loop_detected, "this proxy's Via entry came back");

    // `key: ip` and `groups.ip` count by the address connected to: it is chosen now, and
    // every connection of this request goes there.
    pinned_address pinned;
    if (admission_needs_address(cfg)) {
        auto chosen = pin_origin_address_at_once(cfg, ctx.resolver, target.key, target.port);
        if (!chosen) chosen = co_await pin_origin_address(cfg, ctx.resolver, target.key, target.port);
        if (auto* failure = std::get_if<connect_failure>(&*chosen))
            co_return co_await down.answer(failure->why, failure->details);
        pinned = std::move(std::get<0>(*chosen));
    }
    // The way (routes: direct, or a parent proxy), known before a slot is taken: a
    // destination no parent may carry, or a route whose parents are all down, is answered
    // without one. Through a parent every key below is still the destination's.
    way via;
    if (!cfg.routes.empty()) {
        auto chosen = choose_way_at_once(ctx, cfg, target.key, target.address, target.port);
        if (!chosen) chosen = co_await choose_way(ctx, cfg, target.key, target.address, target.port);
        if (auto* no = std::get_if<failure>(&*chosen)) co_return co_await down.answer(no->why, no->details);
        via = std::move(std::get<way>(*chosen));
        if (!via.all_down.empty())
            co_return co_await down.answer(errc::parents_down, "every parent of the route is down", via.retry_after,
                                           via.all_down);
    }
    // The gate's key (the host, its registrable domain or its address); the origin is still target.key.
    std::string domain_key;
    const std::string& key = ctx.gates.gate_key(cfg, target.key, pinned.text, domain_key);
    if (cfg.robots.read()) {  // the origin's robots.txt first (read once per cache_ttl), then its word
        auto refused = co_await check_robots(ctx, cfg, target, pinned, via.parent, key, down.user_agent());
        if (refused) co_return co_await down.answer(refused->why, refused->details, refused->retry_after);
    }
    permit slot = admit_at_once(ctx, key, pinned.text, down.client());
    if (!slot) {
        auto parked = co_await admit(ctx, key, pinned.text, down.parking(), down.client());
        if (!parked) {
            const refusal& no = parked.error();
            if (no.why == errc::cancelled) co_return false;  // the client left: nobody to answer
            co_return co_await down.answer(no.why, no.details, no.retry_after);
        }
        slot = std::move(*parked);
    }
    namespace asio = boost::asio;

    exchange trip(ctx.metrics, ctx.log, std::move(slot), key);
    const host_policy& policy = trip.policy();
    parent_turn turn;  // at the parent the attempt goes through (each attempt takes one, below)
    const relay_buffers::loan buffers = relay_buffers::lend();
    relay_buffers& scratch = *buffers;
    std::string& pool_key = scratch.pool_key;
    const auto key_pool = [&] {
        if (via.parent) return forwarding::pool_key_through(*via.parent, target, pinned.text, pool_key);
        forwarding::pool_key_of(target, pool_key);
        if (pinned.address) (pool_key += '@') += pinned.text;  // pooled connections go where they were admitted for
    };
    key_pool();
    const bool retryable = down.retryable();
    // HTTP/2 to the origin: over TLS when ALPN picks it (unless `http1`), over plain TCP
    // with prior knowledge when the host is `h2c` (never through a parent: it takes HTTP/1.1).
    const bool may_h2 = target.tls ? policy.upstream != upstream_protocol::http1
                                   : policy.upstream == upstream_protocol::h2c && !via.parent;
    bool head_written = false;  // the HTTP/1.1 request head, written once for every attempt
    static_assert(origin_transport<h1_origin_transport, Client> && origin_transport<h2_origin_stream, Client>);

    // A pooled connection the origin closed meanwhile fails before any response byte.
    // A request that may be sent again is then sent once more, on a new connection; one
    // an HTTP/2 origin did not process (GOAWAY, REFUSED_STREAM) goes again on a new session.
    for (int attempt = 0;; ++attempt) {
        // Through a parent, a turn at it (max_connections), never held while the slot or
        // token was awaited; one free now costs no wait (and no coroutine frame).
        if (via.parent && !turn) {
            trip.through(via.parent.get(), target.tls);
            if (!via.parent->try_take() && !co_await via.parent->take(clock::now() + policy.queue.max_wait)) {
                trip.parent_busy();
                co_return co_await down.answer(errc::queue_timeout, "no connection to the parent proxy within queue.max_wait",
                                               std::chrono::seconds(1), trip.next_hop());
            }
            turn = parent_turn(via.parent);
        }
        // The transport: a stream on an HTTP/2 session, a pooled HTTP/1.1 connection, or a new one of either.
        std::shared_ptr<origin_session> h2;
        // Not in a conditional expression: GCC 12 destroys temporaries of one inside co_await twice.
        if (may_h2) {
            if (auto now = ctx.h2_origins.find_now(pool_key)) h2 = std::move(*now);
            else h2 = co_await ctx.h2_origins.find(pool_key);
        }
        std::optional<timed_socket> origin;
        while (!h2 && attempt == 0) {  // a pooled one the origin sent nothing on while it idled
            origin = ctx.pool.take(pool_key);
            if (!origin) break;
            // The watch looks at once (timed_socket::watch); what it found is reported when
            // the loop has run what was queued before this turn ends. (On an otherwise idle
            // loop that turn, and the ended watch's completion, each cost an epoll_wait.)
            origin->watch();
            co_await asio::post(origin->get_executor(), asio::deferred);
            if (!origin->heard()) break;
            origin.reset();
        }
        const bool reused = h2 || origin;  // a session found, or a connection pooled
        if (!reused) {
            const auto ex = co_await asio::this_coro::executor;
            const auto opening = ctx.h2_origins.opening(pool_key, may_h2, !target.tls, ex);
            origin.emplace(ex);
            const auto opened = co_await open_origin(ctx, cfg, *origin, target, pinned, may_h2, policy.timeouts.connect,
                                                     clock::time_point::max(), via.parent.get());
            if (opened.failure) {
                const errc why = opened.failure->why;
                if (opened.parents_fault)
                    trip.parent_failed(why, opened.failure->details);
                else
                    trip.connect_failed(why);
                // A parent that failed itself (no connection, closed, a malformed answer to
                // CONNECT): another usable way of the route takes the request.
                if (opened.parents_fault && attempt + 1 < forwarding::max_attempts &&
                    co_await next_way(ctx, cfg, target.key, target.address, target.port, why, via, turn)) {
                    trip.through(nullptr, false);  // direct, or through the next parent (its turn above)
                    key_pool();
                    head_written = false;  // another way: its own target form and credentials
                    continue;
                }
                co_return co_await down.answer(why, opened.failure->details, {}, trip.next_hop());
            }
            if (opened.h2) {
                h2 = co_await open_origin_session(ctx, std::move(*origin), key, pool_key, policy,
                                                  cfg.limits.response_header_bytes);
                if (!h2) {
                    trip.connect_failed(errc::origin_bad_response);
                    co_return co_await down.answer(errc::origin_bad_response,
                                                   "the origin did not answer as HTTP/2 within timeouts.connect", {},
                                                   trip.next_hop());
                }
            }
        }

        forwarded result;
        if (h2) {
            h2_origin_stream stream(*h2, reused, ctx.via);
            result = co_await stream.forward(down, trip, target, scratch);
        } else {
            h1_origin_transport connection(ctx, cfg, *origin, reused, reused && retryable, head_written);
            result = co_await connection.forward(down, trip, target, scratch);
        }
        if (result != forwarded::again) co_return result == forwarded::keep;
        if (attempt + 1 == forwarding::max_attempts) {  // only HTTP/2 sessions refuse more than once
            trip.request_refused();
            co_return co_await down.answer(errc::origin_closed, "the origin refused the request on every session", {},
                                           trip.next_hop());
        }
    }
}

}  // namespace politeproxy
