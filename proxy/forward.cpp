#include "politeproxy/forward.hpp"

#include "politeproxy/answers.hpp"
#include "politeproxy/hop_by_hop.hpp"
#include "politeproxy/host_gates.hpp"
#include "politeproxy/host_key.hpp"
#include "politeproxy/metrics.hpp"
#include "politeproxy/origin_connect.hpp"
#include "politeproxy/origin_pool.hpp"
#include "politeproxy/park.hpp"
#include "politeproxy/retry_after.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/url/parse.hpp>

#include <optional>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t response_header_limit = 64 * 1024;
constexpr std::size_t relay_chunk_size = 16 * 1024;
constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";

enum class relay_end { done, read_failed, write_failed };

struct relay_status {
    relay_end end;
    boost::system::error_code ec;
};

// Streams one message from `in` to `out` a chunk at a time, never holding the whole
// body: the header (already parsed into `p`) first, then the body as it arrives. The
// serializer re-frames it (chunked stays chunked, Content-Length stays exact).
template <bool isRequest>
asio::awaitable<relay_status> relay(beast::tcp_stream& in, beast::flat_buffer& in_buffer,
                                    http::parser<isRequest, http::buffer_body>& p, beast::tcp_stream& out,
                                    clock::duration idle) {
    http::serializer<isRequest, http::buffer_body> sr{p.get()};
    auto chunk = std::make_unique<char[]>(relay_chunk_size);
    auto& body = p.get().body();
    out.expires_after(idle);
    if (auto [ec, n] = co_await http::async_write_header(out, sr, use_tuple); ec)
        co_return relay_status{relay_end::write_failed, ec};
    while (!sr.is_done()) {
        if (!p.is_done()) {
            body.data = chunk.get();
            body.size = relay_chunk_size;
            in.expires_after(idle);
            auto [ec, n] = co_await http::async_read(in, in_buffer, p, use_tuple);
            if (ec == http::error::need_buffer) ec = {};
            if (ec) co_return relay_status{relay_end::read_failed, ec};
            body.size = relay_chunk_size - body.size;
            body.data = chunk.get();
            body.more = !p.is_done();
        } else {
            body.data = nullptr;
            body.size = 0;
            body.more = false;
        }
        out.expires_after(idle);
        auto [ec, n] = co_await http::async_write(out, sr, use_tuple);
        if (ec == http::error::need_buffer) ec = {};
        if (ec) co_return relay_status{relay_end::write_failed, ec};
    }
    in.expires_never();
    out.expires_never();
    co_return relay_status{relay_end::done, {}};
}

outcome outcome_of(errc failure) {
    switch (failure) {
    case errc::origin_timeout: return outcome::timeout;
    case errc::origin_refused: return outcome::refused;
    case errc::destination_denied: return outcome::rejected;
    default: return outcome::error;
    }
}

bool is_interim(unsigned status) { return status >= 100 && status < 200 && status != 101; }

}  // namespace

asio::awaitable<bool> send_answer(proxy_context& ctx, beast::tcp_stream& client, errc why, std::string_view details,
                                  bool keep_alive, std::optional<clock::duration> retry_after) {
    ctx.metrics.rejected(why);
    auto res = make_answer(why, details, keep_alive, retry_after);
    client.expires_after(ctx.gates.current_config()->defaults.timeouts.idle);
    auto [ec, n] = co_await http::async_write(client, res, use_tuple);
    co_return !ec && keep_alive;
}

asio::awaitable<bool> forward_request(proxy_context& ctx, beast::tcp_stream& client, beast::flat_buffer& buffer,
                                      request_header_parser& header) {
    auto& req = header.get();
    const bool client_keep_alive = req.keep_alive();
    const bool has_body = header.chunked() || header.content_length().value_or(0) > 0;
    // An answer given before the body was read must close: the body is still unread.
    const bool answer_keeps = client_keep_alive && !has_body;

    const std::string_view target = req.target();
    if (target.starts_with("/") || target == "*")
        co_return co_await send_answer(ctx, client, errc::origin_form_request,
                                       "this is a proxy: send absolute-form requests (http://host/path)", false);
    const auto parsed = boost::urls::parse_absolute_uri(target);
    if (!parsed) co_return co_await send_answer(ctx, client, errc::bad_request, "request target is not an absolute URI", false);
    // Copies: the url views the target, which the rewrite below replaces.
    const boost::urls::url_view url = *parsed;
    const std::string origin_target = url.encoded_target().empty() ? "/" : std::string(url.encoded_target());
    const std::string host_header(url.encoded_host_and_port());
    if (url.scheme_id() != boost::urls::scheme::http)
        co_return co_await send_answer(ctx, client, errc::unsupported_scheme,
                                       "only http:// is forwarded; use CONNECT for https", answer_keeps);
    const std::string host = url.host_address();
    const std::uint16_t port = url.has_port() ? url.port_number() : 80;
    if (host.empty() || port == 0)
        co_return co_await send_answer(ctx, client, errc::bad_request, "request target has no usable host or port", false);
    if (via_contains(req, ctx.via))
        co_return co_await send_answer(ctx, client, errc::loop_detected, "this proxy's Via entry came back", false);

    const std::string key = host_key(host);
    auto granted = co_await park(ctx.gates, key, client.socket());
    if (granted.ec == errc::cancelled) co_return false;  // the client left: nobody to answer
    if (granted.ec)
        co_return co_await send_answer(ctx, client, static_cast<errc>(granted.ec.value()),
                                       granted.ec == errc::queue_full ? "host queue is full" : "waited longer than queue.max_wait",
                                       answer_keeps, granted.retry_after);
    permit slot = std::move(granted.granted);
    ctx.metrics.queue_wait(slot.queue_wait());
    const host_policy& policy = slot.policy();

    http::request_parser<http::buffer_body> request{std::move(header)};
    request.body_limit(boost::none);
    auto& out = request.get();
    const bool expect_continue = beast::iequals(out[http::field::expect], "100-continue");
    strip_hop_by_hop(out);
    if (expect_continue) out.erase(http::field::expect);
    out.target(origin_target);
    out.set(http::field::host, host_header);
    out.version(11);
    out.insert(http::field::via, ctx.via);
    const std::string pool_key = key + ":" + std::to_string(port);

    // A pooled connection the origin closed meanwhile fails before any response byte;
    // a request without a body is then safely sent again on a fresh connection.
    for (int attempt = 0;; ++attempt) {
        std::optional<beast::tcp_stream> origin;
        bool reused = false;
        if (auto idle = ctx.pool.take(pool_key)) {
            origin.emplace(std::move(*idle));
            reused = true;
        } else {
            origin.emplace(co_await asio::this_coro::executor);
            if (auto failure = co_await connect_origin(*ctx.gates.current_config(), *origin, host, port,
                                                       policy.timeouts.connect)) {
                slot.set_outcome(outcome_of(failure->why));
                if (failure->why == errc::origin_refused) slot.report({health_signal::kind::refused});
                co_return co_await send_answer(ctx, client, failure->why, failure->details, answer_keeps);
            }
        }
        connection_tracker tracked(ctx.metrics, connection_side::origin, "http1");
        const bool may_retry = reused && !has_body && attempt == 0;

        if (expect_continue && attempt == 0) {
            client.expires_after(policy.timeouts.idle);
            if (auto [ec, n] = co_await asio::async_write(client, asio::buffer(continue_line), use_tuple); ec)
                co_return false;
        }
        const auto sent_at = clock::now();
        const auto sent = co_await relay(client, buffer, request, *origin, policy.timeouts.idle);
        if (sent.end == relay_end::read_failed) co_return false;  // client broke off its body
        if (sent.end == relay_end::write_failed) {
            if (may_retry) continue;
            slot.set_outcome(outcome::refused);
            slot.report({health_signal::kind::refused});
            co_return co_await send_answer(ctx, client, errc::origin_refused,
                                           "origin closed the connection while receiving the request", false);
        }

        beast::flat_buffer origin_buffer;
        std::optional<http::response_parser<http::buffer_body>> response;
        boost::system::error_code ec;
        do {
            response.emplace();
            response->header_limit(response_header_limit);
            response->body_limit(boost::none);
            if (out.method() == http::verb::head) response->skip(true);
            origin->expires_after(policy.timeouts.response_headers);
            std::tie(ec, std::ignore) = co_await http::async_read_header(*origin, origin_buffer, *response, use_tuple);
        } while (!ec && is_interim(response->get().result_int()));
        if (ec) {
            if (may_retry && !response->got_some()) continue;
            const bool timed_out = ec == beast::error::timeout;
            slot.set_outcome(timed_out ? outcome::timeout : outcome::error);
            if (timed_out)  // the slowest answer there is
                slot.report({health_signal::kind::response, clock::now() - sent_at});
            else if (ec == asio::error::connection_reset || ec == http::error::end_of_stream)
                slot.report({health_signal::kind::refused});
            co_return co_await send_answer(ctx, client, timed_out ? errc::origin_timeout : errc::origin_bad_response,
                                           timed_out ? "no response headers within timeouts.response_headers"
                                                     : "origin response unreadable: " + ec.message(),
                                           false);
        }
        const auto latency = clock::now() - sent_at;
        ctx.metrics.origin_response(latency);

        auto& res = response->get();
        const unsigned status = res.result_int();
        const bool throttled = status == 429 || status == 503;
        slot.set_outcome(throttled ? outcome::throttled : outcome::ok);
        if (throttled)
            slot.report({health_signal::kind::throttled, latency,
                         parse_retry_after(res[http::field::retry_after], std::chrono::system_clock::now(),
                                           policy.retry_after_cap)});
        else
            slot.report({health_signal::kind::response, latency});
        const bool origin_keeps = res.keep_alive();
        strip_hop_by_hop(res);
        res.version(11);
        res.insert(http::field::via, ctx.via);
        res.insert("Proxy-Status", queue_wait_status(slot.queue_wait()));
        bool keep = client_keep_alive && !ctx.draining;
        if (response->need_eof() && !response->is_done()) {
            // The body ends when the origin closes: re-frame it as chunked for an
            // HTTP/1.1 client so its connection can live on.
            if (req.version() >= 11) res.chunked(true);
            else keep = false;
        }
        res.keep_alive(keep);

        const auto received = co_await relay(*origin, origin_buffer, *response, client, policy.timeouts.idle);
        if (received.end == relay_end::read_failed) {
            slot.set_outcome(received.ec == beast::error::timeout ? outcome::timeout : outcome::error);
            co_return false;  // the client saw a truncated body: closing tells it so
        }
        slot.reset();  // the origin is done with this request
        if (received.end == relay_end::write_failed) co_return false;
        if (origin_keeps && response->is_done() && origin_buffer.size() == 0)
            ctx.pool.put(pool_key, origin->release_socket());
        co_return keep;
    }
}

}  // namespace politeproxy
