#pragma once
// The exchange: one request's trip from its admission to the origin's last byte, the same
// wherever it came from. Its slot at the host's gate (exchange/admission), a connection
// to the origin (a pooled HTTP/1.1 one, an HTTP/2 session's stream, or a new one:
// exchange/origin_open), the request sent, the response header read, the response handed
// back, every step reported to the request's exchange, and the connection pooled again.
// Origin transports: HTTP/1.1 here and in forward_over_h1.hpp, HTTP/2 in
// forward_over_h2.hpp, chosen by the host's `upstream` and the origin's ALPN.
//
// A template over the client's side (`Downstream`, moved into the coroutine: the
// interface is exchange/client_side.hpp, which says why it has the methods it has), so
// each client protocol brings only its adapter (server/h1_downstream.cpp,
// server/h2_connection_parts.hpp) and the HTTP/1.1 path pays no indirection.
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/exchange/client_side.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/exchange/robots_fetch.hpp"
#include "politeproxy/exchange/forward_over_h1.hpp"
#include "politeproxy/exchange/forward_over_h2.hpp"
#include "politeproxy/exchange/h2_origin_session.hpp"
#include "politeproxy/exchange/origin_open.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/origin_pool.hpp"
#include "politeproxy/exchange/exchange_context.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

namespace forwarding {

inline constexpr int max_interim_responses = 16;
/// The answer's details when the origin closed before its request was written whole.
inline constexpr std::string_view closed_while_sending = "origin closed the connection while receiving the request";
/// Streams a request tries when HTTP/2 origins leave it unprocessed: above a GOAWAY's last
/// stream (then on a new session), or REFUSED_STREAM (the session may still take it later).
inline constexpr int max_h2_attempts = 3;

/// The interim responses relayed past (RFC 9110 section 15.2): 100 Continue, 102
/// Processing, 103 Early Hints. A 101 answers an Upgrade nobody sent (the proxy never
/// forwards one) and other 1xx codes mean nothing known: either is a bad response (502),
/// and the connection, whose protocol the origin may believe switched, is closed.
inline bool is_interim(unsigned status) { return status == 100 || status == 102 || status == 103; }

/// RFC 9110 section 9.2.2: only these may be sent again without the client asking.
inline bool idempotent(boost::beast::http::verb m) {
    using boost::beast::http::verb;
    return m == verb::get || m == verb::head || m == verb::options || m == verb::trace || m == verb::put ||
           m == verb::delete_;
}

/// How long a pooled origin connection is trusted: the origin's Keep-Alive: timeout=N
/// hint less a margin, else 4 s (common servers close idle connections after 5 s).
clock::duration pooled_lifetime(std::string_view hint, clock::duration idle);

/// The origin's pool key, "[https:]host:port", into `out`.
void pool_key_of(const origin_target& target, std::string& out);

}  // namespace forwarding

/// Forwards the request to `target`, whose destination the entry judged (where the deny
/// list needs no DNS; an address DNS gives is judged when connecting); answers the client
/// exactly once. True: the client connection goes on.
template <client_side Downstream>
task<bool> forward_to_origin(exchange_context& ctx, const config& cfg, Downstream down, const origin_target& target) {
    if (down.via_loop(ctx.via)) co_return co_await down.answer(errc::loop_detected, "this proxy's Via entry came back");

    // `key: ip` and `groups.ip` count by the address connected to: it is chosen now, and
    // every connection of this request goes there.
    pinned_address pinned;
    if (admission_needs_address(cfg)) {
        auto chosen = co_await pin_origin_address(cfg, ctx.resolver, target.key, target.port);
        if (auto* failure = std::get_if<connect_failure>(&chosen))
            co_return co_await down.answer(failure->why, failure->details);
        pinned = std::move(std::get<0>(chosen));
    }
    // The gate's key (the host, its registrable domain or its address); the origin is still target.key.
    std::string domain_key;
    const std::string& key = ctx.gates.gate_key(cfg, target.key, pinned.text, domain_key);
    if (cfg.robots.honor) {  // the origin's robots.txt first, once per cache_ttl
        if (auto turn = ctx.gates.robots_due(robots_origin(target), key, pinned.text))
            co_await fetch_robots(ctx, cfg, target, pinned, std::string(down.user_agent()), turn);
    }
    permit slot = admit_at_once(ctx, key, pinned.text);
    if (!slot) {
        auto parked = co_await admit(ctx, key, pinned.text, down.parking());
        if (!parked) {
            const refusal& no = parked.error();
            if (no.why == errc::cancelled) co_return false;  // the client left: nobody to answer
            co_return co_await down.answer(no.why, no.details, no.retry_after);
        }
        slot = std::move(*parked);
    }
    namespace asio = boost::asio;
    namespace beast = boost::beast;
    namespace http = beast::http;

    exchange trip(ctx.metrics, ctx.log, std::move(slot), key);
    const host_policy& policy = trip.policy();
    const relay_buffers::loan buffers = relay_buffers::lend();
    relay_buffers& scratch = *buffers;
    std::string& pool_key = scratch.pool_key;
    forwarding::pool_key_of(target, pool_key);
    if (pinned.address) (pool_key += '@') += pinned.text;  // pooled connections go where they were admitted for
    const bool retryable = down.retryable();
    // HTTP/2 to the origin: over TLS when ALPN picks it (unless `http1`), over plain TCP
    // with prior knowledge when the host is `h2c`.
    const bool may_h2 = target.tls ? policy.upstream != upstream_protocol::http1 : policy.upstream == upstream_protocol::h2c;
    bool head_written = false;

    // A pooled connection the origin closed meanwhile fails before any response byte.
    // A request that may be sent again is then sent once more, on a new connection; one
    // an HTTP/2 origin did not process (GOAWAY, REFUSED_STREAM) goes again on a new session.
    for (int attempt = 0;; ++attempt) {
        std::shared_ptr<origin_session> h2;
        if (may_h2) h2 = co_await ctx.h2_origins.find(pool_key);  // not in a conditional expression: see below
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
        const bool reused = origin.has_value();
        const bool fresh_session = !h2;
        if (!h2 && !reused) {
            const auto ex = co_await asio::this_coro::executor;
            const auto opening = ctx.h2_origins.opening(pool_key, may_h2, !target.tls, ex);
            origin.emplace(ex);
            const auto opened = co_await open_origin(ctx, cfg, *origin, target, pinned, may_h2, policy.timeouts.connect);
            if (opened.failure) {
                trip.connect_failed(opened.failure->why);
                co_return co_await down.answer(opened.failure->why, opened.failure->details);
            }
            if (opened.h2) {
                h2 = co_await open_origin_session(ctx, std::move(*origin), key, pool_key, policy,
                                                  cfg.limits.response_header_bytes);
                if (!h2) {
                    trip.connect_failed(errc::origin_bad_response);
                    co_return co_await down.answer(errc::origin_bad_response,
                                                   "the origin did not answer as HTTP/2 within timeouts.connect");
                }
            }
        }
        if (h2) {
            const auto forwarded = co_await forward_over_h2(down, trip, *h2, fresh_session, target, ctx.via, scratch);
            if (forwarded == h2_forwarded::again && attempt + 1 < forwarding::max_h2_attempts) continue;
            if (forwarded == h2_forwarded::again) {
                trip.request_refused();
                co_return co_await down.answer(errc::origin_closed, "the origin refused the request on every session");
            }
            co_return forwarded == h2_forwarded::keep;
        }
        if (!head_written) {
            if constexpr (relays_http1<Downstream>)
                down.write_head(target, scratch);
            else
                over_h1::write_head(down, target, ctx.via_line, scratch);
            head_written = true;
        }
        connection_tracker tracked(ctx.metrics, connection_side::origin, connection_protocol::http1);
        const bool may_retry = reused && retryable;

        if (down.wants_continue() && !co_await down.send_continue()) co_return false;
        trip.request_sent();
        relay_status sent{};
        if constexpr (relays_http1<Downstream>)
            sent = co_await down.send_request(*origin, scratch, policy.timeouts.idle);
        else
            sent = co_await over_h1::send_request(down, *origin, scratch, policy.timeouts.idle);
        if (sent.end == relay_end::read_failed || sent.end == relay_end::malformed) {
            trip.client_failed();
            co_return co_await down.upload_broken(sent);
        }
        if (sent.end == relay_end::write_failed || origin->heard_close()) {
            if (may_retry) continue;
            trip.request_refused();
            co_return co_await down.answer(errc::origin_closed, forwarding::closed_while_sending);
        }

        beast::flat_buffer& origin_buffer = scratch.from_origin;
        origin_buffer.clear();  // whatever a previous connection left is not ours
        std::optional<origin_response_parser> response;
        boost::system::error_code ec;
        bool spoke_early = false;
        // Interim (1xx) responses are dropped; a bounded number of them, as each takes
        // its own header memory from the request's arena.
        int interim = 0;
        do {
            if (++interim > forwarding::max_interim_responses) {
                ec = http::error::bad_status;
                break;
            }
            response.emplace(down.arena());
            response->header_limit(cfg.limits.response_header_bytes);
            origin->expires_after(policy.timeouts.response_headers);
            ec = co_await read_header(*origin, origin_buffer, *response);
            // On a reused connection the origin speaks only once its request is written
            // whole (a body may stream for long): what the watch heard before the first
            // read began, bytes or a close, answers no request of ours, unless it is an
            // interim response (100 Continue to the body).
            spoke_early = interim == 1 && origin->heard() && (ec || !forwarding::is_interim(response->status()));
        } while (!spoke_early && !ec && forwarding::is_interim(response->status()));
        if (spoke_early) {
            if (may_retry) continue;
            // A close (the watch heard it after the request was written) is a refusal, as
            // above; bytes are a protocol error of this connection: no backoff.
            const bool closed = origin->heard_close();
            if (closed)
                trip.request_refused();
            else
                trip.response_failed(errc::origin_bad_response);
            const std::string_view details =
                closed ? forwarding::closed_while_sending : "the origin answered before its request was written whole";
            const errc why = closed ? errc::origin_closed : errc::origin_bad_response;
            co_return co_await down.answer(why, details);
        }
        if (!ec && response->status() < 200) {
            trip.response_failed(errc::origin_bad_response);
            const std::string details = "the origin answered " + std::to_string(response->status()) +
                                        (response->status() == 101 ? " to a request that asked for no upgrade"
                                                                   : ", an informational status nothing expects");
            co_return co_await down.answer(errc::origin_bad_response, details);  // and the connection is closed
        }
        if (ec) {
            const bool timed_out = ec == beast::error::timeout;
            if (may_retry && !timed_out && !response->got_some()) continue;
            // A TLS origin that closes without close_notify: the stream is truncated.
            const bool closed = ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
                                ec == asio::ssl::error::stream_truncated;
            const errc why = timed_out ? errc::origin_response_timeout
                             : closed  ? errc::origin_closed
                                       : errc::origin_bad_response;
            trip.response_failed(why);
            // Named, not a temporary in the co_await: GCC 12 destroys temporaries of a
            // conditional expression inside co_await twice.
            const std::string details = timed_out ? std::string("no response headers within timeouts.response_headers")
                                                  : "origin response unreadable: " + ec.message();
            co_return co_await down.answer(why, details);
        }
        const unsigned status = response->status();
        trip.response_arrived(status, response->retry_after(), down.method_string(), reused);

        response_plan plan;
        bool keep;
        if constexpr (relays_http1<Downstream>) {
            plan = down.plan(*response);
            keep = down.keeps(plan);
        } else {
            plan = over_h1::plan(down, *response);
            keep = down.keeps_message();
        }
        const bool origin_keeps = response->keep_alive() && plan.from_origin.kind != body_kind::until_close;
        const auto lifetime = forwarding::pooled_lifetime(response->keep_alive_hint(), policy.timeouts.idle);
        relay_status received{};
        if constexpr (relays_http1<Downstream>)
            received = co_await down.deliver(trip, *response, plan, keep, *origin, origin_buffer, scratch,
                                             policy.timeouts.idle);
        else
            received =
                co_await over_h1::deliver(down, trip, *response, plan, *origin, origin_buffer, scratch, policy.timeouts.idle);
        if (received.end == relay_end::read_failed || received.end == relay_end::malformed) {
            trip.body_failed(received.ec == beast::error::timeout);
            co_return false;  // the client saw a truncated body: closing tells it so
        }
        trip.origin_done();
        if (received.end == relay_end::write_failed) co_return false;
        // Relayed whole (done); nothing unasked-for behind it (its next taker checks the socket).
        if (origin_keeps && origin_buffer.size() == 0 && lifetime > clock::duration::zero())
            ctx.pool.put(pool_key, std::move(*origin), lifetime);
        co_return keep;
    }
}

}  // namespace politeproxy
