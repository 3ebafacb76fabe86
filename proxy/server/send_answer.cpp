#include "politeproxy/server/send_answer.hpp"

#include "politeproxy/base/log.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/server/proxy_context.hpp"

#include <boost/beast/http/write.hpp>

namespace politeproxy {
namespace http = boost::beast::http;

void count_answer(proxy_context& ctx, errc why, std::string_view details) {
    ctx.metrics.rejected(why);
    if (ctx.log.enabled(log_level::debug))
        ctx.log.write(log_level::debug, "answer", make_error_code(why).message() + ": " + std::string(details));
}

task<bool> send_answer(proxy_context& ctx, timed_socket& client, errc why, std::string_view details,
                       answer_mode mode, std::optional<clock::duration> retry_after, std::string_view next_hop) {
    count_answer(ctx, why, details);
    auto res = make_answer(why, details, mode.keep_alive, retry_after, next_hop);
    client.expires_after(ctx.gates.current_config()->defaults.timeouts.idle);
    http::response_serializer<http::string_body> serializer(res);
    boost::system::error_code ec;
    if (mode.head)  // the Content-Length of the body a GET would get, and no body
        std::tie(ec, std::ignore) = co_await http::async_write_header(client, serializer, use_tuple);
    else
        std::tie(ec, std::ignore) = co_await http::async_write(client, serializer, use_tuple);
    co_return !ec && mode.keep_alive;
}

task<bool> send_options_answer(proxy_context& ctx, timed_socket& client, bool keep_alive) {
    const answer res = make_options_answer(keep_alive);
    client.expires_after(ctx.gates.current_config()->defaults.timeouts.idle);
    auto [ec, n] = co_await http::async_write(client, res, use_tuple);
    co_return !ec && keep_alive;
}

}  // namespace politeproxy
