#include "politeproxy/origin_connect.hpp"

#include "politeproxy/address_filter.hpp"
#include "politeproxy/config.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>
#include <vector>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

ip_bytes to_bytes(const asio::ip::address& a) {
    if (a.is_v4()) return ipv4_bytes(a.to_v4().to_uint());
    ip_bytes b{};
    const auto v6 = a.to_v6().to_bytes();
    std::memcpy(b.data(), v6.data(), b.size());
    return b;
}

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

asio::awaitable<std::optional<connect_failure>> connect_origin(const config& cfg, boost::beast::tcp_stream& stream,
                                                               std::string_view host, std::uint16_t port,
                                                               clock::duration timeout) {
    const auto deadline = clock::now() + timeout;
    std::vector<tcp::endpoint> candidates;
    boost::system::error_code ec;
    const std::string_view literal = cfg.static_address(host).value_or(host);
    if (const auto address = asio::ip::make_address(literal, ec); !ec) {
        candidates.emplace_back(address, port);
    } else {
        tcp::resolver resolver(co_await asio::this_coro::executor);
        asio::steady_timer timer(resolver.get_executor(), deadline);
        auto done = co_await (resolver.async_resolve(std::string(host), std::to_string(port), use_tuple) ||
                              timer.async_wait(use_tuple));
        if (done.index() == 1)
            co_return connect_failure{errc::origin_timeout, "name look-up timed out"};
        auto& [rec, results] = std::get<0>(done);
        if (rec || results.empty())
            co_return connect_failure{errc::dns_failure, "cannot resolve " + std::string(host)};
        for (const auto& r : results) candidates.push_back(r.endpoint());
    }

    std::vector<tcp::endpoint> permitted;
    for (const auto& e : candidates)
        if (cfg.security.destinations.permitted(to_bytes(e.address()))) permitted.push_back(e);
    if (permitted.empty())
        co_return connect_failure{errc::destination_denied,
                                  "destination " + candidates.front().address().to_string() + " is denied"};

    stream.expires_at(deadline);
    auto [cec, endpoint] = co_await stream.async_connect(permitted, use_tuple);
    stream.expires_never();
    if (cec == boost::beast::error::timeout)
        co_return connect_failure{errc::origin_timeout, "connect timed out"};
    if (cec) co_return connect_failure{errc::origin_refused, "connect failed: " + cec.message()};
    stream.socket().set_option(tcp::no_delay(true), ec);
    co_return std::nullopt;
}

}  // namespace politeproxy
