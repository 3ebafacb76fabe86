#include "politeproxy/exchange/parent_requests.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/exchange_context.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/http1/origin_response.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/read_header.hpp"
#include "politeproxy/net/send_all.hpp"

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

#include <memory_resource>

namespace politeproxy {

task<std::optional<parent_failure>> open_parent_tunnel(timed_socket& stream, const parent_config& parent,
                                                       const std::string& authority, std::size_t header_limit,
                                                       clock::time_point deadline, std::string* early) {
    const auto own = [](errc why, std::string details) { return parent_failure{{why, std::move(details)}, true}; };
    const auto not_own = [](errc why, std::string details) { return parent_failure{{why, std::move(details)}, false}; };
    namespace beast = boost::beast;
    std::string request = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n";
    if (!parent.authorization.empty()) request += "Proxy-Authorization: " + parent.authorization + "\r\n";
    request += "\r\n";
    stream.expires_at(deadline);
    if (auto [ec, n] = co_await send_all(stream, boost::asio::buffer(request)); ec) {
        stream.expires_never();
        co_return own(errc::origin_closed, "parent " + parent.name + " closed before taking the CONNECT");
    }
    std::pmr::monotonic_buffer_resource memory;
    origin_response_parser response{wire_allocator(&memory)};
    response.header_limit(header_limit);
    beast::flat_buffer buffer;
    const auto ec = co_await read_header(stream, buffer, response);
    stream.expires_never();
    const std::string who = "parent " + parent.name;
    if (ec == beast::error::timeout)
        co_return not_own(errc::origin_connect_timeout, who + " did not open the tunnel to " + authority + " in time");
    if (ec == beast::http::error::end_of_stream || ec == boost::asio::error::connection_reset)
        co_return own(errc::origin_closed, who + " closed without answering the CONNECT");
    if (ec) co_return own(errc::origin_bad_response, who + "'s answer to CONNECT is unreadable: " + ec.message());
    const unsigned status = response.status();
    if (status == 407) co_return not_own(errc::parent_credentials_refused, who + " refused this proxy's credentials (407)");
    if (status < 200 || status > 299) {
        const bool about_destination = status == 502 || status == 503 || status == 504;
        co_return not_own(about_destination ? errc::origin_refused_by_parent : errc::parent_refused,
                          who + " answered " + std::to_string(status) + " to CONNECT " + authority);
    }
    if (buffer.size() > 0) {
        if (!early)
            co_return own(errc::origin_bad_response, who + " sent bytes behind its " + std::to_string(status) +
                                                         " to CONNECT before the tunnel carried any");
        early->assign(static_cast<const char*>(buffer.data().data()), buffer.size());
    }
    co_return std::nullopt;
}

void readdress_to_parent(std::string& head, const origin_target& target, std::string_view authorization) {
    const std::size_t method_end = head.find(' ');
    if (method_end == std::string::npos || !head.ends_with("\r\n\r\n")) return;  // not a head the proxy wrote
    const std::size_t target_at = method_end + 1;
    std::string absolute = target.tls ? "https://" : "http://";
    target.append_host(absolute);
    if (head.compare(target_at, 2, "* ") == 0)
        head.replace(target_at, 1, absolute);
    else
        head.insert(target_at, absolute);
    if (authorization.empty()) return;
    std::string line = "Proxy-Authorization: ";
    (line += authorization) += "\r\n";
    head.insert(head.size() - 2, line);
}

task<std::optional<parent_failure>> connect_through(exchange_context& ctx, const config& cfg, timed_socket& stream,
                                                    parent_state& parent, const std::string& authority,
                                                    clock::time_point deadline, std::string* early) {
    const parent_config& p = parent.config();
    const auto started = clock::now();
    if (auto no = co_await connect_parent(cfg, ctx.resolver, stream, p.host, p.port, deadline - started))
        co_return parent_failure{std::move(*no), true};
    parent.connected(clock::now() - started);
    if (authority.empty()) co_return std::nullopt;
    co_return co_await open_parent_tunnel(stream, p, authority, cfg.limits.response_header_bytes, deadline, early);
}

}  // namespace politeproxy
