#include "politeproxy/admin/admin_server.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/free_heap.hpp"
#include "politeproxy/base/off_thread.hpp"

#include "politeproxy/admin/admin_api.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/live_overrides.hpp"
#include "politeproxy/admin/hosts_view.hpp"
#include "politeproxy/admin/metrics_renderer.hpp"
#include "politeproxy/admin/status_page.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace politeproxy {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto admin_idle = std::chrono::seconds(30);
constexpr std::size_t admin_request_limit = 64 * 1024;
constexpr auto accept_error_pause = std::chrono::milliseconds(100);
constexpr std::size_t release_heap_after_hosts = 10000;  // answers built over ~2 MB and more
constexpr auto background_deadline = std::chrono::seconds(30);

admin_response route(const admin_view& view, const admin_request& req) {
    http::response<http::string_body> res{http::status::ok, 11};
    res.set(http::field::cache_control, "no-store");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    const std::string_view path = req.target().substr(0, req.target().find('?'));
    // With a fleet: whether its store is reachable, beside every listing of hosts.
    if (view.fleet_store && (path == "/hosts" || path == "/api/hosts")) {
        if (const char* state = view.fleet_store()) res.set("Politeproxy-Fleet-Store", state);
    }
    if (path.starts_with("/api/")) {
        answer_api(view, req, res);
    } else if (req.method() != http::verb::get && req.method() != http::verb::head) {
        res.result(http::status::method_not_allowed);
        res.set(http::field::allow, "GET, HEAD");
        res.body() = "405 Method Not Allowed: only the API (/api/...) takes writes\n";
    } else if (path == "/metrics") {
        res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res.body() = view.renderer.render(view.metrics, view.gates, view.parents, view.idle_origin_connections(),
                                          view.overrides.list());
    } else if (path == "/hosts") {
        res.set(http::field::content_type, "application/json");
        res.body() = render_hosts_json(view.gates, view.parents, view.gates.time().now(), std::chrono::system_clock::now(),
                                       view.names);
    } else if (path == "/" || path == "/status.js") {
        const bool page = path == "/";
        res.set(http::field::content_type, page ? "text/html; charset=utf-8" : "text/javascript; charset=utf-8");
        res.set("Content-Security-Policy", status_page_policy());
        res.set("X-Content-Type-Options", "nosniff");
        res.body() = page ? status_page_html() : status_page_script();
    } else if (path == "/healthz") {
        res.body() = "ok\n";
    } else if (path == "/readyz") {
        const bool ready = view.ready();
        res.result(ready ? http::status::ok : http::status::service_unavailable);
        res.body() = ready ? "ready\n" : "not ready\n";
    } else {
        res.result(http::status::not_found);
        res.body() = "404 Not Found: try /, /metrics, /hosts, /api/hosts, /api/overrides, /healthz or /readyz\n";
    }
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    if (req.method() == http::verb::head) res.body().clear();  // Content-Length stays: RFC 9110 9.3.2
    return res;
}

// Where an answer that reads every tracked host is built; null: any other, on the loop.
asio::thread_pool* thread_for(const admin_view& view, const admin_request& req) {
    if (req.method() != http::verb::get && req.method() != http::verb::head) return nullptr;
    const std::string_view path = req.target().substr(0, req.target().find('?'));
    if (path == "/metrics") return view.metrics_thread;
    if (path == "/hosts" || path == "/api/hosts") return view.views_thread;
    return nullptr;
}

// route() on `thread`; a 503 if it takes longer than background_deadline.
task<admin_response> route_on(asio::thread_pool& thread, const admin_view& view, admin_request req) {
    const bool keep_alive = req.keep_alive();
    auto work = [view, req = std::move(req)] { return route(view, req); };
    if (auto res = co_await off_thread(thread, std::move(work), clock::now() + background_deadline))
        co_return std::move(*res);
    admin_response res{http::status::service_unavailable, 11};
    res.set(http::field::cache_control, "no-store");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.set(http::field::retry_after, "30");
    res.body() = "503 Service Unavailable: the answer took over 30 s to build\n";
    res.keep_alive(keep_alive);
    res.prepare_payload();
    co_return res;
}

task<void> serve(tcp_socket socket, admin_view view) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(admin_request_limit);
        stream.expires_after(admin_idle);
        auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
        if (ec) co_return;
        admin_response res;
        asio::thread_pool* thread = thread_for(view, parser.get());
        if (thread) res = co_await route_on(*thread, view, parser.release());  // no co_await in ?: (GCC 12)
        else res = route(view, parser.get());
        const bool keep = res.keep_alive();
        stream.expires_after(admin_idle);  // the write's own time, whatever the read and the build took
        auto [wec, m] = co_await http::async_write(stream, res, use_tuple);
        // The answer (a /hosts body can be hundreds of MB) is freed here: give it back.
        res = {};
        if (thread && view.gates.size() >= release_heap_after_hosts) asio::post(*thread, release_free_heap);
        if (wec || !keep) break;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp_socket::shutdown_send, ignored);
}

}  // namespace

task<void> run_admin_listener(tcp_acceptor& acceptor, admin_view view) {
    steady_timer pause(co_await asio::this_coro::executor);
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        if (ec) {  // e.g. out of file descriptors: do not spin
            pause.expires_after(accept_error_pause);
            co_await pause.async_wait(use_tuple);
            continue;
        }
        asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), view), asio::detached);
    }
}

}  // namespace politeproxy
