#include "politeproxy/exchange/robots_fetch.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/exchange/origin_open.hpp"
#include "politeproxy/exchange/parent_requests.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/policy/robots_txt.hpp"
#include "politeproxy/exchange/exchange_context.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <charconv>

namespace politeproxy {
namespace asio = boost::asio;
namespace http = boost::beast::http;

std::string robots_origin(const origin_target& target) {
    std::string out = target.tls ? "https://" : "http://";
    out += target.key;
    out += ':';
    char digits[8];
    out.append(digits, std::to_chars(digits, digits + sizeof digits, target.port).ptr);
    return out;
}

namespace {

// The longest a robots.txt fetch may take (the host's first requests wait for it).
constexpr auto robots_fetch_timeout = std::chrono::seconds(10);

// A field value as it may go on the wire: no control characters (a client's User-Agent
// has passed the request parser, but this line is written by hand).
std::string field_safe(std::string_view v) {
    std::string out;
    for (char c : v.substr(0, 512))
        if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
    return out;
}

}  // namespace

task<void> fetch_robots(exchange_context& ctx, const config& cfg, const origin_target& target, const pinned_address& pinned,
                        const std::shared_ptr<parent_state>& parent,
                        std::string user_agent, robots_turn& turn) {
    permit slot = std::move(turn.slot);
    if (!slot) {
        auto parked = co_await admit(ctx, turn.key(), pinned.text, {});
        if (!parked) co_return;
        slot = std::move(*parked);
    }
    exchange trip(ctx.metrics, ctx.log, std::move(slot), turn.key());
    const host_policy& policy = trip.policy();
    // The host's first requests wait for this: the whole fetch is bounded, whatever the
    // host's own (longer) timeouts say.
    const auto deadline = clock::now() + robots_fetch_timeout;
    const auto within = [&](clock::duration phase) { return std::min(clock::now() + phase, deadline); };
    const std::string agent = field_safe(user_agent);

    parent_turn carried;  // through the request's parent, as the request itself goes
    if (parent) {
        trip.through(parent.get(), target.tls);
        if (!co_await parent->take(deadline)) {
            trip.parent_busy();
            co_return;
        }
        carried = parent_turn(parent);
    }
    timed_socket origin_socket(co_await asio::this_coro::executor);
    const auto opened = co_await open_origin(ctx, cfg, origin_socket, target, pinned, false, policy.timeouts.connect,
                                             deadline, parent.get());
    if (opened.failure) {
        if (opened.parents_fault)
            trip.parent_failed(opened.failure->why, opened.failure->details);
        else
            trip.connect_failed(opened.failure->why);
        co_return;
    }

    std::string request = "GET /robots.txt HTTP/1.1\r\nHost: ";
    target.append_host(request);
    request += "\r\nUser-Agent: " + agent + "\r\nAccept: text/plain, */*;q=0.5\r\nConnection: close\r\n";
    request += ctx.via_line;
    request += "\r\n";
    if (parent && !target.tls) readdress_to_parent(request, target, parent->config().authorization);
    trip.request_sent();
    origin_socket.expires_at(within(policy.timeouts.idle));
    if (auto [ec, n] = co_await asio::async_write(origin_socket, asio::buffer(request), use_tuple); ec) {
        trip.response_failed(errc::origin_closed);
        co_return;
    }

    boost::beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(cfg.limits.response_header_bytes));
    parser.body_limit(robots_txt_max_bytes);
    origin_socket.expires_at(within(policy.timeouts.response_headers));
    if (auto [ec, n] = co_await http::async_read_header(origin_socket, buffer, parser, use_tuple); ec) {
        trip.response_failed(ec == boost::beast::error::timeout ? errc::origin_response_timeout
                                                                : errc::origin_bad_response);
        co_return;
    }
    const unsigned status = parser.get().result_int();
    if (status == 407 && parent && !target.tls) {  // the parent's word on the proxy's credentials: failed
        trip.parent_refused_credentials();
        co_return;
    }
    trip.response_arrived(status, parser.get()[http::field::retry_after], "GET", false);
    origin_socket.expires_at(within(policy.timeouts.idle));
    auto [ec, n] = co_await http::async_read(origin_socket, buffer, parser, use_tuple);
    if (ec) {
        trip.body_failed(ec == boost::beast::error::timeout);
        co_return;
    }
    trip.origin_done();
    if (status >= 400 && status < 500 && status != 429) {
        turn.failed = false;  // no robots.txt: nothing asked
    } else if (status >= 200 && status < 300) {
        turn.failed = false;
        turn.delay = crawl_delay_for(parser.get().body(), agent);
    }
}

}  // namespace politeproxy
