#include "politeproxy/http1/forward.hpp"

#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/tls/session.hpp"

#include "politeproxy/http1/answers.hpp"
#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/hop_by_hop.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/admin/metrics.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/origin_pool.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/exchange/park.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/http1/relay.hpp"

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>

#include <charconv>
#include <optional>
#include <variant>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr int max_interim_responses = 16;
constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
// How long a pooled connection is trusted when the origin did not say (Keep-Alive:
// timeout=N): common servers close idle connections after 5 s.
constexpr auto default_origin_keep_alive = std::chrono::seconds(4);

bool is_interim(unsigned status) { return status >= 100 && status < 200 && status != 101; }

// RFC 9110 section 9.2.2: only these may be sent again without the client asking.
bool idempotent(http::verb m) {
    return m == http::verb::get || m == http::verb::head || m == http::verb::options || m == http::verb::trace ||
           m == http::verb::put || m == http::verb::delete_;
}

// The origin's Keep-Alive: timeout=N hint, less a margin, else the common default.
clock::duration pooled_lifetime(std::string_view hint, clock::duration idle) {
    clock::duration lifetime = default_origin_keep_alive;
    if (const auto pos = hint.find("timeout="); pos != std::string_view::npos) {
        unsigned seconds = 0;
        const char* first = hint.data() + pos + 8;
        if (auto [end, ec] = std::from_chars(first, hint.data() + hint.size(), seconds); ec == std::errc{})
            lifetime = std::chrono::seconds(seconds > 1 ? seconds - 1 : 0);
    }
    return std::min(lifetime, idle);
}

// The proxy's answer to a request body that could not be read whole, when no response
// has begun: the client hears why; the connection closes (the rest of the body is unread).
task<bool> answer_broken_upload(proxy_context& ctx, timed_socket& client, const relay_status& sent) {
    if (sent.end == relay_end::malformed) {
        const std::string details = std::string("malformed chunked body: ") + sent.details;
        co_await send_answer(ctx, client, errc::bad_framing, details, {});
    } else if (sent.ec == beast::error::timeout)
        co_await send_answer(ctx, client, errc::request_timeout, "the request body stalled for timeouts.idle", {});
    co_return false;  // otherwise the client broke off its body: nobody to answer
}

// The forwarded header, into scratch.head: the client's end-to-end fields; the target,
// Host, framing and Max-Forwards written from what the proxy decided, never copied from
// the client's text; then Via.
void write_request_head(http::request_header<wire_fields>& out, const origin_target& target,
                        const request_verdict& verdict, std::string_view via_line, relay_buffers& scratch) {
    strip_hop_by_hop(out);
    if (verdict.framing_fields) {
        out.erase(http::field::transfer_encoding);
        out.erase(http::field::content_length);
    }
    if (verdict.max_forwards >= 0) out.erase(http::field::max_forwards);
    out.target(out.method() == http::verb::options && target.no_path ? std::string_view("*")
                                                                       : std::string_view(target.path));
    out.version(11);
    std::string& added = scratch.added;
    added.clear();
    target.append_host(added);
    out.set(http::field::host, added);
    added = via_line;
    append_framing(verdict.body.kind, verdict.body.length, {}, added);
    if (verdict.max_forwards >= 0) {
        added += "Max-Forwards: ";
        added += std::to_string(verdict.max_forwards);
        added += "\r\n";
    }
    scratch.head.clear();
    serialize_head(out, added, scratch.head);
}

}  // namespace

task<bool> forward_request(proxy_context& ctx, const config& cfg, timed_socket& client, beast::flat_buffer& buffer,
                           request_header_parser& header, const request_verdict& verdict,
                           const origin_target& target) {
    auto& out = header.get();
    const unsigned client_version = out.version();
    const http::verb method = out.method();
    const bool client_keep_alive = out.keep_alive();
    const bool has_body = verdict.has_body();
    const bool retryable = !has_body && idempotent(method);  // on a fresh connection, if a pooled one fails
    // An answer given before the body was read must close: the body is still unread.
    const answer_mode keeping{client_keep_alive && !has_body, method == http::verb::head};
    const answer_mode closing{false, keeping.head};

    if (via_contains(out, ctx.via))
        co_return co_await send_answer(ctx, client, errc::loop_detected, "this proxy's Via entry came back", closing);
    if (auto denied = check_known_destination(cfg, target.key, target.address))
        co_return co_await send_answer(ctx, client, denied->why, denied->details, keeping);

    const std::string& key = target.key;
    permit slot = admit_at_once(ctx, key);
    if (!slot) {
        auto admitted = co_await admit(ctx, client, key, keeping);
        if (!admitted.granted) co_return admitted.keep;
        slot = std::move(admitted.granted);
    }
    exchange trip(ctx.metrics, ctx.log, std::move(slot), key);
    const host_policy& policy = trip.policy();
    const relay_buffers::loan buffers = relay_buffers::lend();
    relay_buffers& scratch = *buffers;

    const bool expect_continue = beast::iequals(out[http::field::expect], "100-continue");
    if (expect_continue) out.erase(http::field::expect);  // answered here once the slot is held
    write_request_head(out, target, verdict, ctx.via_line, scratch);
    // "host:port", in lent storage (no allocation once warm)
    std::string& pool_key = scratch.pool_key;
    pool_key.assign(target.tls ? "https:" : "");
    pool_key += key;
    pool_key += ':';
    char port_digits[8];
    pool_key.append(port_digits, std::to_chars(port_digits, port_digits + sizeof port_digits, target.port).ptr);

    // A pooled connection the origin closed meanwhile fails before any response byte.
    // An idempotent request without a body is then sent once more, on a new connection.
    for (int attempt = 0;; ++attempt) {
        std::optional<timed_socket> origin = attempt == 0 ? ctx.pool.take(pool_key, retryable) : std::nullopt;
        const bool reused = origin.has_value();
        if (!reused) {
            origin.emplace(co_await asio::this_coro::executor);
            if (auto failure = co_await connect_origin(cfg, ctx.resolver, *origin, key, target.port,
                                                       policy.timeouts.connect)) {
                trip.connect_failed(failure->why);
                co_return co_await send_answer(ctx, client, failure->why, failure->details, keeping);
            }
            if (target.tls) {  // nothing goes to an origin whose certificate did not verify
                origin->expires_after(policy.timeouts.connect);
                const auto hs = co_await tls::session::connect(*origin, *ctx.origin_tls, key);
                origin->expires_never();
                if (hs.ec) {
                    const errc why = hs.ec == beast::error::timeout ? errc::origin_connect_timeout
                                     : hs.verify_error.empty()      ? errc::tls_protocol_error
                                                                    : errc::tls_certificate_error;
                    trip.connect_failed(why);
                    const std::string details = !hs.verify_error.empty() ? hs.verify_error
                                                : why == errc::origin_connect_timeout
                                                    ? std::string("TLS handshake not done within timeouts.connect")
                                                    : hs.ec.message();
                    co_return co_await send_answer(ctx, client, why, details, keeping);
                }
            }
        }
        connection_tracker tracked(ctx.metrics, connection_side::origin, connection_protocol::http1);
        const bool may_retry = reused && retryable;

        if (expect_continue && attempt == 0) {
            client.expires_after(policy.timeouts.idle);
            if (auto [ec, n] = co_await asio::async_write(client, asio::buffer(continue_line), use_tuple); ec)
                co_return false;
        }
        trip.request_sent();
        const auto sent = co_await relay(client, buffer, verdict.body, verdict.body.kind == body_kind::chunked, *origin,
                                         policy.timeouts.idle, scratch);
        if (sent.end == relay_end::read_failed || sent.end == relay_end::malformed) {
            trip.client_failed();
            co_return co_await answer_broken_upload(ctx, client, sent);
        }
        if (sent.end == relay_end::write_failed) {
            if (may_retry) continue;
            trip.request_refused();
            co_return co_await send_answer(ctx, client, errc::origin_closed,
                                           "origin closed the connection while receiving the request", closing);
        }

        beast::flat_buffer& origin_buffer = scratch.from_origin;
        origin_buffer.clear();  // whatever a previous connection left is not ours
        std::optional<origin_response_parser> response;
        boost::system::error_code ec;
        // Interim (1xx) responses are dropped; a bounded number of them, as each takes
        // its own header memory from the request's arena.
        int interim = 0;
        do {
            if (++interim > max_interim_responses) {
                ec = http::error::bad_status;
                break;
            }
            response.emplace(out.get_allocator());
            response->header_limit(cfg.limits.response_header_bytes);
            origin->expires_after(policy.timeouts.response_headers);
            ec = co_await read_header(*origin, origin_buffer, *response);
        } while (!ec && is_interim(response->status()));
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
            co_return co_await send_answer(ctx, client, why, details, closing);
        }
        const unsigned status = response->status();
        trip.response_arrived(status, response->retry_after(), http::to_string(method), reused);

        const auto plan = plan_response(response->framing(), status, method == http::verb::head, client_version);
        const bool origin_keeps = response->keep_alive() && plan.from_origin.kind != body_kind::until_close;
        const auto lifetime = pooled_lifetime(response->keep_alive_hint(), policy.timeouts.idle);
        const bool keep = client_keep_alive && !ctx.draining && !plan.ends_at_close;
        std::string& added = scratch.added;
        added = ctx.via_line;
        added += "Proxy-Status: ";
        trip.append_proxy_status(added);
        added += "\r\n";
        append_framing(plan.told, plan.length, response->other_codings(), added);
        if (!keep) added += "Connection: close\r\n";
        scratch.head.clear();
        response->write_head(added, scratch.head);

        const auto received = co_await relay(*origin, origin_buffer, plan.from_origin, plan.out_chunked, client,
                                             policy.timeouts.idle, scratch);
        if (received.end == relay_end::read_failed || received.end == relay_end::malformed) {
            trip.body_failed(received.ec == beast::error::timeout);
            co_return false;  // the client saw a truncated body: closing tells it so
        }
        trip.origin_done();
        if (received.end == relay_end::write_failed) co_return false;
        // Relayed whole (done); nothing unasked-for behind it.
        if (origin_keeps && origin_buffer.size() == 0 && lifetime > clock::duration::zero())
            ctx.pool.put(pool_key, std::move(*origin), lifetime);
        co_return keep;
    }
}

}  // namespace politeproxy
