#pragma once
// The HTTP/1.1 origin transport (exchange/origin_transport.hpp): one request on one
// HTTP/1.1 connection, pooled or new. The request head written, 100 Continue relayed, the
// request sent, the response header read past interim (1xx) responses, a reused
// connection that failed before any response byte told apart (the request may go again
// on a new one), every failure classified and reported, the response relayed, and the
// connection pooled again for as long as the origin's Keep-Alive says.
//
// Two ways with the client's side (`Client`, exchange/client_side.hpp), chosen at
// compile time: a client that relays HTTP/1.1 bytes itself (relays_http1: an HTTP/1.1
// client) rewrites its header in place and passes both bodies through as they are
// framed, the proxy's fastest path; any other gives its request as a message and takes
// the response as one, framed here (h1_message below). Included by forward_to_origin.hpp
// (and by the origin_exchange fuzz target, which reads responses as forward() does).
#include "politeproxy/base/char_class.hpp"
#include "politeproxy/base/field.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/response_head.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/client_side.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/origin_transport.hpp"
#include "politeproxy/exchange/parent_requests.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/http1/body_reader.hpp"
#include "politeproxy/http1/framing.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/http1/relay.hpp"
#include "politeproxy/net/origin_pool.hpp"
#include "politeproxy/net/send_all.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace politeproxy {

namespace forwarding {

inline constexpr int max_interim_responses = 16;
/// The answer's details when the origin closed before its request was written whole.
inline constexpr std::string_view closed_while_sending = "origin closed the connection while receiving the request";

/// The interim responses relayed past (RFC 9110 section 15.2): 100 Continue, 102
/// Processing, 103 Early Hints. A 101 answers an Upgrade nobody sent (the proxy never
/// forwards one) and other 1xx codes mean nothing known: either is a bad response (502),
/// and the connection, whose protocol the origin may believe switched, is closed.
inline bool is_interim(unsigned status) { return status == 100 || status == 102 || status == 103; }

/// How long a pooled origin connection is trusted: the origin's Keep-Alive: timeout=N
/// hint less a margin, else 4 s (common servers close idle connections after 5 s).
clock::duration pooled_lifetime(std::string_view hint, clock::duration idle);

}  // namespace forwarding

/// The request and its response as messages, framed for an HTTP/1.1 origin: for a client
/// that does not relay HTTP/1.1 bytes itself (an HTTP/2 stream).
namespace h1_message {

/// The origin's request head, into scratch.head: the start line, Host, the message's
/// fields (cookies joined into one line, RFC 9113 section 8.2.3), Via, then the framing
/// decided for the body (Content-Length: 0 for an empty POST, PUT or PATCH: some origins
/// want a length there, 411).
template <client_side Client>
void write_head(Client& down, const origin_target& target, std::string_view via_line, relay_buffers& scratch) {
    std::string& out = scratch.head;
    out.clear();
    out += down.method_string();
    out += ' ';
    out += target.no_path && down.method_string() == "OPTIONS" ? std::string_view("*") : std::string_view(target.path);
    out += " HTTP/1.1\r\nHost: ";
    target.append_host(out);
    out += "\r\n";
    std::string& cookies = scratch.added;
    cookies.clear();
    down.message_fields([&](std::string_view name, std::string_view value) {
        if (name != "cookie") return append_field_line(name, value, out);
        if (!cookies.empty()) cookies += "; ";
        cookies += value;
    });
    if (!cookies.empty()) append_field_line("cookie", cookies, out);
    out += via_line;
    const body_framing body = down.body();
    const std::string_view method = down.method_string();
    const bool expects_body = method == "POST" || method == "PUT" || method == "PATCH";
    if (body.kind == body_kind::none && expects_body)
        out += "Content-Length: 0\r\n";
    else
        append_framing(body.kind, body.length, {}, out);
    out += "\r\n";
}

/// scratch.head, then the body as the message gives it: chunked (with the trailers) when
/// its length is unknown. A body of known length is written whole with its last byte,
/// whether the message's end came with it or comes later: the origin may answer from then
/// on, and that answer is not early.
template <client_side Client>
task<relay_status> send_request(Client& down, timed_socket& origin, relay_buffers& scratch, clock::duration idle) {
    origin.expires_after(idle);
    if (auto [ec, n] = co_await send_all(origin, boost::asio::buffer(scratch.head)); ec)
        co_return relay_status{relay_end::write_failed, ec};
    const body_framing body = down.body();
    if (body.kind == body_kind::none) co_return relay_status{relay_end::done, {}};
    const bool chunked = body.kind == body_kind::chunked;
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    std::string& framed = scratch.joined;
    std::uint64_t unsent = body.length;
    for (;;) {
        const auto piece = co_await down.read_body(room, idle);
        if (piece.failure.end != relay_end::done) co_return piece.failure;
        framed.clear();
        if (chunked) {
            const std::span<const field> trailers = piece.last ? down.request_trailers() : std::span<const field>();
            append_chunk(room.first(piece.size), piece.last && trailers.empty(), framed);
            if (!trailers.empty()) append_trailer_section(trailers, framed);
        } else
            framed.append(room.data(), piece.size);
        origin.expires_after(idle);
        if (auto [ec, n] = co_await send_all(origin, boost::asio::buffer(framed)); ec)
            co_return relay_status{relay_end::write_failed, ec};
        if (!chunked) unsent -= std::min<std::uint64_t>(unsent, piece.size);
        if (piece.last || (!chunked && unsent == 0)) break;
    }
    origin.expires_never();
    co_return relay_status{relay_end::done, {}};
}

/// How the response's body is read, for a message (no HTTP/1.1 framing to tell).
template <client_side Client>
response_plan plan(const Client& down, const origin_response_parser& response) {
    return plan_response(response.framing(), response.status(), down.method_string() == "HEAD", 11);
}

/// The response as a message: its head (the origin's fields, names in lower case; the
/// hop-by-hop and framing fields were left out as they arrived; content-length when
/// known), then its body read as the origin framed it, piece by piece as the client takes
/// them, its trailers with the last.
template <client_side Client>
task<relay_status> deliver(Client& down, exchange& trip, const origin_response_parser& response,
                           const response_plan& plan, timed_socket& origin, boost::beast::flat_buffer& origin_buffer,
                           relay_buffers& scratch, clock::duration idle) {
    response_head head;
    head.status = response.status();
    std::string_view rest = response.forwarded_fields();
    head.fields.reserve(typical_field_count);
    while (!rest.empty()) {
        const std::size_t end = rest.find("\r\n");
        const std::string_view line = rest.substr(0, end);
        rest.remove_prefix(end + 2);
        const std::size_t colon = line.find(':');
        head.fields.push_back({lower_case(line.substr(0, colon)), std::string(line.substr(colon + 2))});
    }
    if (plan.told == body_kind::length) head.fields.push_back({"content-length", std::to_string(plan.length)});
    head.end_stream = plan.from_origin.kind == body_kind::none;
    const relay_status client_gone{relay_end::write_failed, boost::asio::error::connection_aborted};
    if (!co_await down.respond_message(trip, head)) co_return client_gone;
    if (head.end_stream) co_return relay_status{relay_end::done, {}};

    body_reader reader(origin, origin_buffer, plan.from_origin);
    const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
    for (;;) {
        const auto piece = co_await reader.next(room, idle);
        if (piece.failure.end != relay_end::done) {
            down.body_broken();
            co_return piece.failure;
        }
        const std::span<const field> trailers = piece.last ? reader.trailers() : std::span<const field>();
        if (!co_await down.respond_body(room.first(piece.size), piece.last, trailers)) co_return client_gone;
        if (piece.last) co_return relay_status{relay_end::done, {}};
    }
}

}  // namespace h1_message

/// One attempt of one request on `origin`. `reused`: the connection came from the pool
/// (reported with the response). `may_retry`: a reused connection that fails before any
/// response byte is answered `again` (the origin closed it meanwhile; the request may be
/// sent once more on a new one). `head_written`: the origin's request head is in
/// scratch.head already, written by an earlier attempt; set once written (every attempt
/// of a request sends the same head). When the response was relayed whole and the origin
/// keeps the connection, forward() puts it back in the pool (scratch.pool_key).
///
/// The response's parser is a member, so it lives in the caller's coroutine frame:
/// forward()'s own frame (one more per request) then stays under the 1020 bytes up to
/// which Asio recycles frames (RECYCLING_ALLOCATOR_CACHE_SIZE in CMakeLists.txt) instead
/// of allocating one each time: 912 bytes with GCC 12, 1216 with the parser in it. Mind
/// its size when adding locals to forward().
class h1_origin_transport {
public:
    h1_origin_transport(exchange_context& ctx, const config& cfg, timed_socket& origin, bool reused, bool may_retry,
                bool& head_written)
        : ctx_(ctx), cfg_(cfg), origin_(origin), reused_(reused), may_retry_(may_retry), head_written_(head_written) {}

    template <client_side Client>
    task<forwarded> forward(Client& down, exchange& trip, const origin_target& target, relay_buffers& scratch);

private:
    /// The proxy's own answer to the client, naming the parent that carried the request
    /// (next-hop), if one did. Not a coroutine: forward()'s frame keeps only its task.
    template <client_side Client>
    static task<bool> answer(Client& down, const exchange& trip, errc why, std::string_view details) {
        return down.answer(why, details, std::nullopt, trip.next_hop());
    }

    exchange_context& ctx_;
    const config& cfg_;
    timed_socket& origin_;
    bool reused_;
    bool may_retry_;
    bool& head_written_;
    std::optional<origin_response_parser> response_;  ///< the response header being read
};

template <client_side Client>
task<forwarded> h1_origin_transport::forward(Client& down, exchange& trip, const origin_target& target,
                                     relay_buffers& scratch) {
    namespace asio = boost::asio;
    namespace beast = boost::beast;
    namespace http = beast::http;
    timed_socket& origin = origin_;
    const bool may_retry = may_retry_;
    const host_policy& policy = trip.policy();
    if (!head_written_) {
        if constexpr (relays_http1<Client>)
            down.write_head(target, scratch);
        else
            h1_message::write_head(down, target, ctx_.via_line, scratch);
        if (!target.tls && trip.parent())  // plain HTTP through a parent (over TLS: a tunnel through it)
            readdress_to_parent(scratch.head, target, trip.parent()->config().authorization);
        head_written_ = true;
    }
    connection_tracker tracked(ctx_.metrics, connection_side::origin, connection_protocol::http1);

    if (down.wants_continue() && !co_await down.send_continue()) co_return forwarded::close;
    trip.request_sent();
    relay_status sent{};
    if constexpr (relays_http1<Client>)
        sent = co_await down.send_request(origin, scratch, policy.timeouts.idle);
    else
        sent = co_await h1_message::send_request(down, origin, scratch, policy.timeouts.idle);
    if (sent.end == relay_end::read_failed || sent.end == relay_end::malformed) {
        trip.client_failed();
        co_return finished(co_await down.upload_broken(sent));
    }
    if (sent.end == relay_end::write_failed || origin.heard_close()) {
        if (may_retry) co_return forwarded::again;
        trip.request_refused();
        co_return finished(co_await answer(down, trip, errc::origin_closed, forwarding::closed_while_sending));
    }

    beast::flat_buffer& origin_buffer = scratch.from_origin;
    origin_buffer.clear();  // whatever a previous connection left is not ours
    std::optional<origin_response_parser>& response = response_;
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
        response->header_limit(cfg_.limits.response_header_bytes);
        origin.expires_after(policy.timeouts.response_headers);
        ec = co_await read_header(origin, origin_buffer, *response);
        // On a reused connection the origin speaks only once its request is written
        // whole (a body may stream for long): what the watch heard before the first
        // read began, bytes or a close, answers no request of ours, unless it is an
        // interim response (100 Continue to the body).
        spoke_early = interim == 1 && origin.heard() && (ec || !forwarding::is_interim(response->status()));
    } while (!spoke_early && !ec && forwarding::is_interim(response->status()));
    if (spoke_early) {
        if (may_retry) co_return forwarded::again;
        // A close (the watch heard it after the request was written) is a refusal, as
        // above; bytes are a protocol error of this connection: no backoff.
        const bool closed = origin.heard_close();
        if (closed)
            trip.request_refused();
        else
            trip.response_failed(errc::origin_bad_response);
        const std::string_view details =
            closed ? forwarding::closed_while_sending : "the origin answered before its request was written whole";
        const errc why = closed ? errc::origin_closed : errc::origin_bad_response;
        co_return finished(co_await answer(down, trip, why, details));
    }
    // A parent's 407 (plain HTTP through it) is about this proxy's credentials: never the client's business.
    const bool parent_refused = !ec && response->status() == 407 && !target.tls && trip.parent();
    if (!ec && (response->status() < 200 || parent_refused)) {
        if (parent_refused)
            trip.parent_refused_credentials();
        else
            trip.response_failed(errc::origin_bad_response);
        const errc why = parent_refused ? errc::parent_credentials_refused : errc::origin_bad_response;
        const std::string details =
            parent_refused ? std::string("the parent proxy refused this proxy's credentials")
                           : "the origin answered " + std::to_string(response->status()) +
                                 (response->status() == 101 ? " to a request that asked for no upgrade"
                                                            : ", an informational status nothing expects");
        co_return finished(co_await answer(down, trip, why, details));  // and the connection is closed
    }
    if (ec) {
        const bool timed_out = ec == beast::error::timeout;
        if (may_retry && !timed_out && !response->got_some()) co_return forwarded::again;
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
        co_return finished(co_await answer(down, trip, why, details));
    }
    const unsigned status = response->status();
    trip.response_arrived(status, [&](std::string_view name) { return response->field(name); }, down.method_string(),
                          reused_);

    response_plan plan;
    bool keep;
    if constexpr (relays_http1<Client>) {
        plan = down.plan(*response);
        keep = down.keeps(plan);
    } else {
        plan = h1_message::plan(down, *response);
        keep = down.keeps_message();
    }
    const bool origin_keeps = response->keep_alive() && plan.from_origin.kind != body_kind::until_close;
    const auto lifetime = forwarding::pooled_lifetime(response->keep_alive_hint(), policy.timeouts.idle);
    relay_status received{};
    if constexpr (relays_http1<Client>)
        received =
            co_await down.deliver(trip, *response, plan, keep, origin, origin_buffer, scratch, policy.timeouts.idle);
    else
        received = co_await h1_message::deliver(down, trip, *response, plan, origin, origin_buffer, scratch,
                                                policy.timeouts.idle);
    if (received.end == relay_end::read_failed || received.end == relay_end::malformed) {
        trip.body_failed(received.ec == beast::error::timeout);
        co_return forwarded::close;  // the client saw a truncated body: closing tells it so
    }
    trip.origin_done();
    if (received.end == relay_end::write_failed) co_return forwarded::close;
    // Relayed whole (done); nothing unasked-for behind it (its next taker checks the socket).
    if (origin_keeps && origin_buffer.size() == 0 && lifetime > clock::duration::zero())
        ctx_.pool.put(scratch.pool_key, std::move(origin), lifetime);
    co_return finished(keep);
}

}  // namespace politeproxy
