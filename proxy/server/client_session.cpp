#include "politeproxy/server/client_session.hpp"
#include "politeproxy/base/executor.hpp"

#include "politeproxy/policy/address_filter.hpp"
#include "politeproxy/server/entry_target.hpp"
#include "politeproxy/server/send_answer.hpp"
#include "politeproxy/server/client_identity.hpp"
#include "politeproxy/server/h1_client_side.hpp"
#include "politeproxy/server/h2_connection.hpp"
#include "politeproxy/server/proxy_auth.hpp"
#include "politeproxy/server/tunnel.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/http1/request_head.hpp"
#include "politeproxy/server/session_set.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/tls/session.hpp"

#include <boost/asio/this_coro.hpp>

#include <array>
#include <optional>
#include <string>
#include <variant>
#include <boost/asio/write.hpp>

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

// Every Proxy-Authorization field of a request that must carry credentials.
template <class Fields>
proxy_credentials credentials_of(const Fields& fields) {
    proxy_credentials out;
    out.required = true;
    for (auto [it, end] = fields.equal_range(http::field::proxy_authorization); it != end; ++it) out.add(it->value());
    return out;
}

// Closing with unread request bytes makes the kernel send a reset that can destroy the
// answer just written; half-close first and drain briefly (RFC 9112 section 9.6). Inside
// TLS the close_notify comes first, so the client can tell the end from a cut (a
// response read to the close), and waiting for the client's is the drain.
task<void> close_gracefully(timed_socket& client) {
    if (client.secure()) {
        client.expires_after(lingering_close);
        co_await tls::session::shutdown(client);
        co_return;
    }
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

// What a plain connection opens with.
enum class opening { http1, http2, nothing };

// Whether the client opens with the HTTP/2 preface (h2c with prior knowledge). Reads
// what a first request's read would (an HTTP/1.1 client loses nothing: its bytes stay
// in `buffer`), more only while the bytes still match the preface. `nothing`: the
// client closed, reset or stayed silent for `idle` before sending a byte.
task<opening> read_opening(timed_socket& client, beast::flat_buffer& buffer, clock::duration idle) {
    client.expires_after(idle);
    for (;;) {
        const std::string_view seen(static_cast<const char*>(buffer.data().data()), buffer.size());
        const std::size_t n = std::min(seen.size(), h2_preface.size());
        if (seen.substr(0, n) != h2_preface.substr(0, n)) co_return opening::http1;
        if (n == h2_preface.size()) co_return opening::http2;
        auto [ec, got] = co_await client.async_read_some(buffer.prepare(4096), use_tuple);
        // Bytes cut short: the request loop meets the error again and answers it.
        if (ec) co_return buffer.size() == 0 ? opening::nothing : opening::http1;
        buffer.commit(got);
    }
}

task<void> serve_requests(proxy_context& ctx, timed_socket& client, beast::flat_buffer& buffer,
                          session_set::handle& registration, const tcp::endpoint& peer, bool allowed,
                          const intercepted_origin* in_tls);

// Whose request (clients:): null without clients:. Its identify_by header, if any, is
// taken out of the request (never forwarded). `outer`: inside intercepted TLS, the
// CONNECT's client.
std::shared_ptr<client_state> identify(proxy_context& ctx, const config& cfg, request_header_parser& header,
                                       std::string_view user, const tcp::endpoint& peer, std::string_view outer) {
    if (!cfg.clients) return nullptr;
    const clients_config& c = *cfg.clients;
    const std::string address = c.identify_by == clients_config::identity::address ? address_text(peer.address()) : "";
    return identify_client(ctx.gates.clients(), c, {.user = user, .peer = address, .outer = outer}, header.get(),
                           ctx.gates.time().now());
}

// An intercepted CONNECT: 200, then TLS with the client as its origin, then its requests.
task<void> serve_intercepted(proxy_context& ctx, timed_socket& client, beast::flat_buffer& buffer,
                             session_set::handle& registration, const tcp::endpoint& peer, connect_target target,
                             std::string who) {
    const auto cfg = ctx.gates.current_config();
    client.expires_after(cfg->defaults.timeouts.idle);
    if (auto [ec, n] = co_await asio::async_write(client, asio::buffer(connect_established), use_tuple); ec) co_return;
    // A client that sends garbage or stalls mid-handshake is closed at the deadline.
    client.expires_after(cfg->defaults.timeouts.idle);
    const std::string_view eager(static_cast<const char*>(buffer.data().data()), buffer.size());
    const auto hs = co_await tls::session::accept(client, *ctx.intercept, target.key, eager);
    buffer.consume(buffer.size());
    if (hs.ec) {
        if (ctx.log.enabled(log_level::debug))
            ctx.log.write(log_level::debug, "intercept", target.key + ": client TLS handshake failed: " + hs.ec.message());
        co_return;
    }
    intercepted_origin origin{std::move(target), {}, std::move(who)};
    const auto sni = hs.server_name.empty() ? std::nullopt : read_host(hs.server_name);
    origin.name_key = sni ? sni->key : origin.target.key;
    if (ctx.log.enabled(log_level::debug))
        ctx.log.write(log_level::debug, "intercept", origin.target.key + ": TLS with the client, SNI '" + hs.server_name + "'");
    if (hs.protocol == "h2")
        co_await serve_h2(ctx, client, buffer, registration, true, &origin);
    else
        co_await serve_requests(ctx, client, buffer, registration, peer, true, &origin);
}

task<void> serve_requests(proxy_context& ctx, timed_socket& client, beast::flat_buffer& buffer,
                          session_set::handle& registration, const tcp::endpoint& peer, bool allowed,
                          const intercepted_origin* in_tls) {
    for (;;) {
        if (ctx.draining) break;
        const auto cfg = ctx.gates.current_config();
        field_arena arena(ctx.field_blocks);  // this request's header fields, freed as one
        request_header_parser header(std::piecewise_construct, std::make_tuple(), std::make_tuple(arena.allocator()));
        header.header_limit(static_cast<std::uint32_t>(cfg->limits.request_header_bytes));
        header.body_limit(boost::none);
        client.expires_after(cfg->defaults.timeouts.idle);
        registration.idle = buffer.size() == 0;  // a drain may close us while we wait
        const auto rec = co_await read_header(client, buffer, header);
        registration.idle = false;
        if (rec == beast::error::timeout && header.got_some()) {
            co_await send_answer(ctx, client, errc::request_timeout, "the request header stalled for timeouts.idle", {});
            break;
        }
        if (rec == http::error::end_of_stream || rec == beast::error::timeout ||
            rec == asio::error::connection_reset || rec == asio::error::operation_aborted)
            co_return;
        bool keep = false;
        const auto& req = header.get();
        // The entry's checks in their order (policy/entry_rules.hpp): the head, then the
        // target and its destination, then the credentials (inside intercepted TLS the
        // CONNECT was authorized), new ones hashed off this thread: a refused request
        // costs no hash.
        const auto verdict = rec || !allowed ? request_verdict{} : check_request_head(req, cfg->limits, !in_tls);
        const bool head_passed = !rec && allowed && !verdict.refusal;
        const bool connect = req.method() == http::verb::connect;
        const bool judged = head_passed && !verdict.answer_options;
        // Parsed in place (no copy on every request's path).
        const auto target = !judged || connect
                                ? std::variant<origin_target, target_error>(target_error{errc::bad_request, ""})
                            : in_tls ? parse_intercepted_target(req.target(), req[http::field::host],
                                                                req.method() == http::verb::options, in_tls->target,
                                                                in_tls->name_key, req.get_allocator())
                                     : parse_origin_target(req.target(), req.get_allocator());
        std::optional<connect_target> tunnel_to;
        std::optional<entry_refusal> where_refused;
        if (judged && connect) {
            auto judged_connect = judge_connect(*cfg, req.target());
            if (auto* no = std::get_if<entry_refusal>(&judged_connect))
                where_refused = std::move(*no);
            else
                tunnel_to = std::move(std::get<connect_target>(judged_connect));
        } else if (judged && !connect) {
            where_refused = refuse_target(*cfg, target);
        }
        const auto credentials = cfg->security.users && !in_tls ? credentials_of(req) : proxy_credentials{};
        std::optional<auth_refusal> auth_refused;
        std::string user;
        if (credentials.required && head_passed && !where_refused)
            auth_refused = co_await refuse_credentials(ctx, *cfg, credentials, address_text(peer.address()), &user);
        if (rec) {
            if (in_tls && !header.got_some()) co_return;  // a TLS error or close, not a request
            const std::string_view seen(static_cast<const char*>(buffer.data().data()), buffer.size());
            // The parser keeps the start line it took (its method), and the buffer holds what follows it.
            const auto refusal = refuse_unparsed_head(rec, seen, !req.method_string().empty(), cfg->limits);
            co_await send_answer(ctx, client, refusal.why, refusal.details, {});
        } else if (!allowed) {
            const std::string details = "client " + peer.address().to_string() + " is not in security.allow_clients";
            co_await send_answer(ctx, client, errc::client_denied, details, {});
        } else if (verdict.refusal) {
            co_await send_answer(ctx, client, *verdict.refusal, verdict.details, {});
        } else if (where_refused) {
            // A denied destination leaves the connection usable (no body unread); a target
            // that does not parse, or any CONNECT refused, closes it.
            const bool keeps = where_refused->why == errc::destination_denied && !connect && req.keep_alive() &&
                               !verdict.has_body();
            keep = co_await send_answer(ctx, client, where_refused->why, where_refused->details,
                                        {keeps, req.method() == http::verb::head});
        } else if (auth_refused) {
            // Without credentials the connection stays for the retry with them (curl's
            // way); wrong ones close it, so each guess costs a connection. A body stays
            // unread: then close too.
            keep = co_await send_answer(ctx, client, auth_refused->why, auth_refused->details,
                                        {credentials.fields == 0 && req.keep_alive() && !verdict.has_body(),
                                         req.method() == http::verb::head},
                                        auth_refused->retry_after);
        } else if (verdict.answer_options) {  // a body it had stays unread: then close
            keep = co_await send_options_answer(ctx, client, req.keep_alive() && !verdict.has_body());
        } else if (req.method() == http::verb::connect) {  // outside intercepted TLS: the rules refuse it inside
            auto who = identify(ctx, *cfg, header, user, peer, {});
            auto intercept = co_await run_tunnel(ctx, *cfg, client, buffer, header, *tunnel_to, who);
            if (intercept) {
                std::string outer;  // named first: no conditional's temporaries inside a co_await (GCC 12)
                if (who) outer = who->name();
                co_await serve_intercepted(ctx, client, buffer, registration, peer, std::move(*intercept), std::move(outer));
            }
            break;  // a refusal must still reach the client (see close_gracefully)
        } else {
            const std::string_view outer = in_tls ? std::string_view(in_tls->client) : std::string_view();
            auto who = identify(ctx, *cfg, header, user, peer, outer);
            keep = co_await forward_request(ctx, *cfg, client, buffer, header, verdict, std::get<origin_target>(target),
                                            std::move(who));
        }
        if (!keep) break;
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
    registered.get().idle = true;  // a drain may close a connection that has not sent a byte
    const opening opened = co_await read_opening(client, buffer, ctx.gates.current_config()->defaults.timeouts.idle);
    registered.get().idle = false;
    switch (opened) {
    case opening::http2: co_await serve_h2(ctx, client, buffer, registered.get(), allowed, nullptr); break;
    case opening::http1: co_await serve_requests(ctx, client, buffer, registered.get(), peer, allowed, nullptr); break;
    case opening::nothing: break;
    }
    co_await close_gracefully(client);
}

}  // namespace politeproxy
