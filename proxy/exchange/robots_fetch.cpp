#include "politeproxy/exchange/robots_fetch.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/admission.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/origin_open.hpp"
#include "politeproxy/exchange/parent_requests.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/policy/robots_txt.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <charconv>
#include <memory_resource>

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

std::optional<origin_target> redirect_target(const origin_target& from, std::string_view location,
                                             std::pmr::memory_resource& arena) {
    const wire_allocator alloc(&arena);
    if (location.starts_with('/') && !location.starts_with("//")) {  // the same origin, another path
        origin_target next(alloc);
        next.key = from.key;
        next.address = from.address;
        next.port = from.port;
        next.tls = from.tls;
        next.path = location.substr(0, location.find('#'));
        return next;
    }
    const auto scheme_is = [&](std::string_view scheme) {
        return location.size() > scheme.size() &&
               std::equal(scheme.begin(), scheme.end(), location.begin(),
                          [](char a, char b) { return a == (b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b); });
    };
    const bool tls = scheme_is("https://");
    if (!tls && !scheme_is("http://")) return std::nullopt;
    std::string_view rest = location.substr(tls ? 8 : 7);
    rest = rest.substr(0, rest.find('#'));
    const std::string as_http = "http://" + std::string(rest);
    auto parsed = parse_origin_target(as_http, alloc);
    auto* next = std::get_if<origin_target>(&parsed);
    if (!next) return std::nullopt;
    next->tls = tls;
    if (tls) {  // no port written: https's own
        const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
        const auto bracket = authority.rfind(']');
        const bool port_written = authority.find(':', bracket == std::string_view::npos ? 0 : bracket) !=
                                  std::string_view::npos;
        if (!port_written) next->port = 443;
    }
    if (next->path.empty()) next->path = "/";
    return std::move(*next);
}

namespace {

// The longest a robots.txt fetch may take, redirects and all (the host's first requests wait for it).
constexpr auto robots_fetch_timeout = std::chrono::seconds(10);

// RFC 9309 2.3.1.2: at least five consecutive redirects are followed.
constexpr int max_redirects = 5;

// A field value as it may go on the wire: no control characters (a client's User-Agent
// has passed the request parser, but this line is written by hand).
std::string field_safe(std::string_view v) {
    std::string out;
    for (char c : v.substr(0, 512))
        if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
    return out;
}

// One GET of `at.path` and what came of it. Its steps are reported to `trip` when there
// is one (the robots.txt of the request's own origin; a redirect's other hops are not
// that host's health).
struct robots_answer {
    unsigned status = 0;  ///< 0: no answer
    bool throttled = false;  ///< the answer says "slow down" (the host's throttle signals)
    std::string body;     ///< its first robots_txt_max_bytes
    std::string location;
};

task<robots_answer> get_once(exchange_context& ctx, const config& cfg, const origin_target& at,
                             const pinned_address& pinned, parent_state* parent, const std::string& agent,
                             clock::time_point deadline, const host_policy& policy, exchange* trip) {
    const auto within = [&](clock::duration phase) { return std::min(clock::now() + phase, deadline); };
    robots_answer out;
    timed_socket origin_socket(co_await asio::this_coro::executor);
    const auto opened = co_await open_origin(ctx, cfg, origin_socket, at, pinned, false, policy.timeouts.connect,
                                             deadline, parent);
    if (opened.failure) {
        if (trip && opened.parents_fault) trip->parent_failed(opened.failure->why, opened.failure->details);
        else if (trip) trip->connect_failed(opened.failure->why);
        co_return out;
    }

    std::string request = "GET ";
    request += at.path;
    request += " HTTP/1.1\r\nHost: ";
    at.append_host(request);
    request += "\r\nUser-Agent: " + agent + "\r\nAccept: text/plain, */*;q=0.5\r\nConnection: close\r\n";
    request += ctx.via_line;
    request += "\r\n";
    if (parent && !at.tls) readdress_to_parent(request, at, parent->config().authorization);
    if (trip) trip->request_sent();
    origin_socket.expires_at(within(policy.timeouts.idle));
    if (auto [ec, n] = co_await asio::async_write(origin_socket, asio::buffer(request), use_tuple); ec) {
        if (trip) trip->response_failed(errc::origin_closed);
        co_return out;
    }

    boost::beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(cfg.limits.response_header_bytes));
    parser.body_limit(boost::none);  // read below up to robots_txt_max_bytes, whatever the length says
    origin_socket.expires_at(within(policy.timeouts.response_headers));
    if (auto [ec, n] = co_await http::async_read_header(origin_socket, buffer, parser, use_tuple); ec) {
        if (trip)
            trip->response_failed(ec == boost::beast::error::timeout ? errc::origin_response_timeout
                                                                     : errc::origin_bad_response);
        co_return out;
    }
    const unsigned status = parser.get().result_int();
    if (status == 407 && parent && !at.tls) {  // the parent's word on the proxy's credentials
        if (trip) trip->parent_refused_credentials();
        co_return out;
    }
    const auto field_value = [&](std::string_view name) {
        const auto found = parser.get().find(name);
        return found == parser.get().end() ? std::string_view() : std::string_view(found->value());
    };
    if (trip) trip->response_arrived(status, field_value, "GET", false);
    out.throttled = policy.throttle.heard(status, field_value);
    // RFC 9309 2.5: a longer file is read up to the limit (its rules there apply).
    while (!parser.is_done() && parser.get().body().size() < robots_txt_max_bytes) {
        origin_socket.expires_at(within(policy.timeouts.idle));
        if (auto [ec, n] = co_await http::async_read_some(origin_socket, buffer, parser, use_tuple); ec) {
            if (trip) trip->body_failed(ec == boost::beast::error::timeout);
            co_return out;
        }
    }
    if (trip) trip->origin_done();
    out.status = status;
    out.location = std::string(field_value("location"));
    out.body = std::move(parser.get().body());
    co_return out;
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
    // The host's first requests wait for this: the whole fetch is bounded, whatever the
    // host's own (longer) timeouts say.
    const auto deadline = clock::now() + robots_fetch_timeout;
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
    // From here on the proxy asks: no answer, or one that is not the file, leaves it unreachable.
    turn.read.what = robots_read::kind::unreachable;
    std::pmr::monotonic_buffer_resource arena;
    std::optional<origin_target> at = redirect_target(target, "/robots.txt", arena);
    const host_policy policy = trip.policy();  // a copy: the slot (and its policy) goes back after the first hop
    const pinned_address anywhere;  // another host's: any of its addresses (judged when connecting)
    for (int hop = 0; hop <= max_redirects; ++hop) {
        const bool same_origin = at->key == target.key && at->port == target.port && at->tls == target.tls;
        // Named, not a temporary in the co_await: GCC 12 destroys temporaries of a
        // conditional expression inside co_await twice.
        const pinned_address& to = same_origin ? pinned : anywhere;
        exchange* reported = hop == 0 ? &trip : nullptr;
        const robots_answer got =
            co_await get_once(ctx, cfg, *at, to, parent.get(), agent, deadline, policy, reported);
        if (got.throttled) co_return;  // a challenge page, a CDN's 403: not the file, unreachable for now
        if (got.status >= 200 && got.status < 300) {
            auto rules = std::make_shared<const robots_rules>(robots_rules::parse(got.body));
            turn.read = {robots_read::kind::rules, rules, rules->crawl_delay(agent)};
            co_return;
        }
        if (got.status >= 300 && got.status < 400) {
            at = redirect_target(*at, got.location, arena);
            if (at) continue;
            break;  // nowhere to go: as a 4xx
        }
        if (got.status >= 400 && got.status < 500 && got.status != 429) break;  // "unavailable": no restrictions
        co_return;  // 5xx, 429, no answer: unreachable (turn.read's default)
    }
    turn.read = {robots_read::kind::no_restrictions, nullptr, std::nullopt};  // a 4xx, or redirects beyond max_redirects
}

}  // namespace politeproxy
