// tls_load: the HTTPS load generator of the intercept benchmark (run_bench.py).
//
// wrk cannot send CONNECT, so it cannot drive an intercepting proxy. tls_load opens
// --connections connections to --target; with --connect it first asks for a tunnel
// (CONNECT AUTHORITY, answer 200), then completes TLS (SNI --sni, the certificate
// verified against --cafile for that name or address) and sends keep-alive
// `GET --path` requests, one at a time per connection, until --seconds have passed.
// With --per-connection N each connection is closed (close_notify) after N responses and
// a new one is opened: the TCP connect, the CONNECT and a full TLS handshake (no session
// resumption) every N requests.
//
// Two latencies, as wrk keeps them: a request's, from writing it to reading the last byte
// of its response; and a connection's set-up, from the TCP connect to the end of the TLS
// handshake (the CONNECT included), which no request's latency includes.
//
// With --rate R the requests are paced, as wrk2 paces them: each connection sends one
// every connections/R seconds (the connections staggered), and a request's latency runs
// from the moment it was due, so a target that falls behind is charged for the wait
// (no coordinated omission). The schedule starts when a client's first connection is
// ready; later set-ups run as soon as their predecessor closed, in the time before the
// next request is due: one that takes longer makes that request late, and its latency
// includes the wait (a crawler that must reconnect waits too).
//
// --warmup S: latencies of the first S seconds are not kept (the opening burst of
// --connections handshakes at once, the target's pool filling); their requests are
// still checked and counted in "requests".
//
// Every response is checked as the wrk scripts check theirs (common.lua): status 200,
// the origin's X-Bench-Origin header, and the body length. The figures are printed as
// one line "BENCH_JSON {...}" with the keys of common.lua; exit status 3 when any
// request failed. Single-threaded: run it pinned to one core.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using namespace asio::experimental::awaitable_operators;

namespace {

struct options {
    std::string target_host = "127.0.0.1";
    std::string target_port;
    std::string connect;  // CONNECT this authority first; empty: TLS at once
    std::string sni;      // the name verified (and sent as SNI unless an address)
    std::string host;     // Host header; default: --sni
    std::string path = "/1k";
    std::string cafile;
    long expect_length = -1;
    int connections = 64;
    double seconds = 10;
    int per_connection = 0;  // 0: one connection for the whole run
    double rate = 0;         // requests per second over all connections; 0: each sends when answered
    double warmup = 0;       // seconds whose latencies are not kept
};

struct results {
    clock_type::time_point measured_from;  // the end of --warmup
    std::vector<std::uint32_t> latencies_us;
    std::vector<std::uint32_t> setups_us;
    std::uint64_t requests = 0, ok = 0, bad = 0, bytes = 0, handshakes = 0;
    std::uint64_t err_connect = 0, err_read = 0, err_write = 0, err_status = 0, err_timeout = 0;
    std::string first_bad;

    void failed(std::uint64_t& counter, const std::string& why) {
        ++counter;
        ++bad;
        if (first_bad.empty()) first_bad = why;
    }
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "tls_load: %s\nusage: tls_load --target HOST:PORT --sni NAME --cafile PEM [--connect AUTHORITY]\n"
                 "  [--host HOST] [--path /1k] [--expect-length N] [--connections 64] [--seconds 10]\n"
                 "  [--per-connection N] [--rate REQUESTS_PER_SECOND] [--warmup SECONDS]\n",
                 why);
    std::exit(2);
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) usage(("no value for " + flag).c_str());
        const std::string v = argv[++i];
        if (flag == "--target") {
            const auto colon = v.rfind(':');
            if (colon == std::string::npos) usage("--target is HOST:PORT");
            o.target_host = v.substr(0, colon);
            o.target_port = v.substr(colon + 1);
        } else if (flag == "--connect") o.connect = v;
        else if (flag == "--sni") o.sni = v;
        else if (flag == "--host") o.host = v;
        else if (flag == "--path") o.path = v;
        else if (flag == "--cafile") o.cafile = v;
        else if (flag == "--expect-length") o.expect_length = std::stol(v);
        else if (flag == "--connections") o.connections = std::stoi(v);
        else if (flag == "--seconds") o.seconds = std::stod(v);
        else if (flag == "--per-connection") o.per_connection = std::stoi(v);
        else if (flag == "--rate") o.rate = std::stod(v);
        else if (flag == "--warmup") o.warmup = std::stod(v);
        else usage(("unknown flag " + flag).c_str());
    }
    if (o.target_port.empty() || o.sni.empty() || o.cafile.empty()) usage("--target, --sni and --cafile are needed");
    if (o.host.empty()) o.host = o.sni;
    return o;
}

std::uint32_t micros_since(clock_type::time_point t0) {
    return static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count());
}

bool is_address(const std::string& name) {
    boost::system::error_code ec;
    asio::ip::make_address(name, ec);
    return !ec;
}

// Sends CONNECT and reads the proxy's answer; true when it is 200 with nothing after it.
awaitable<bool> open_tunnel(tcp::socket& socket, const options& o, results& r) {
    const std::string request = "CONNECT " + o.connect + " HTTP/1.1\r\nHost: " + o.connect + "\r\n\r\n";
    boost::system::error_code ec;
    co_await asio::async_write(socket, asio::buffer(request), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
        r.failed(r.err_write, "CONNECT write: " + ec.message());
        co_return false;
    }
    std::string answer;
    const std::size_t n = co_await asio::async_read_until(socket, asio::dynamic_buffer(answer), "\r\n\r\n",
                                                          asio::redirect_error(asio::use_awaitable, ec));
    if (ec || answer.compare(0, 12, "HTTP/1.1 200") != 0 || answer.size() != n) {
        r.failed(r.err_status, "CONNECT answered: " + (ec ? ec.message() : answer.substr(0, 60)));
        co_return false;
    }
    co_return true;
}

// One connection at a time, until the deadline.
awaitable<void> client(const options& o, ssl::context& tls, tcp::resolver::results_type target,
                       clock_type::time_point deadline, int index, results& r) {
    auto ex = co_await asio::this_coro::executor;
    const auto interval = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(o.rate > 0 ? o.connections / o.rate : 0.0));
    std::optional<clock_type::time_point> due;  // with --rate: when the next request is due
    http::request<http::empty_body> request{http::verb::get, o.path, 11};
    request.set(http::field::host, o.host);
    request.set(http::field::user_agent, "tls_load");
    boost::system::error_code ec;
    while (clock_type::now() < deadline) {
        const auto opened = clock_type::now();
        tcp::socket socket(ex);
        co_await asio::async_connect(socket, target, asio::redirect_error(asio::use_awaitable, ec));
        const auto refused = [&]() -> awaitable<void> {  // a target that refuses is not hammered
            asio::steady_timer pause(ex, std::chrono::milliseconds(10));
            co_await pause.async_wait(asio::use_awaitable);
        };
        if (ec) {
            r.failed(r.err_connect, "connect: " + ec.message());
            co_await refused();
            continue;
        }
        socket.set_option(tcp::no_delay(true), ec);
        if (!o.connect.empty() && !co_await open_tunnel(socket, o, r)) {
            co_await refused();
            continue;
        }

        ssl::stream<tcp::socket> stream(std::move(socket), tls);
        if (!is_address(o.sni)) SSL_set_tlsext_host_name(stream.native_handle(), o.sni.c_str());
        stream.set_verify_callback(ssl::host_name_verification(o.sni));
        co_await stream.async_handshake(ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            r.failed(r.err_connect, "TLS handshake: " + ec.message());
            co_await refused();
            continue;
        }
        ++r.handshakes;
        if (opened >= r.measured_from) r.setups_us.push_back(micros_since(opened));

        boost::beast::flat_buffer buffer;
        bool reusable = true;
        for (int sent = 0; reusable && (o.per_connection == 0 || sent < o.per_connection); ++sent) {
            auto started = clock_type::now();
            if (started >= deadline) break;  // by the clock: a paced client that fell behind stops too
            if (o.rate > 0) {
                if (!due) due = started + interval * index / o.connections;
                if (started < *due) {
                    asio::steady_timer wait(ex, *due);
                    co_await wait.async_wait(asio::use_awaitable);
                }
                started = *due;
                *due += interval;
            }
            if (started >= deadline) break;
            const auto sent_at = clock_type::now();  // the warm-up is judged by the clock, not by when it was due
            co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
            if (ec) {
                r.failed(r.err_write, "write: " + ec.message());
                reusable = false;
                break;
            }
            http::response<http::string_body> response;
            co_await http::async_read(stream, buffer, response, asio::redirect_error(asio::use_awaitable, ec));
            if (ec) {
                r.failed(r.err_read, "read: " + ec.message());
                reusable = false;
                break;
            }
            ++r.requests;
            if (sent_at >= r.measured_from) r.latencies_us.push_back(micros_since(started));
            r.bytes += response.body().size();
            const bool from_origin = response.find("X-Bench-Origin") != response.end();
            if (response.result_int() == 200 && from_origin &&
                (o.expect_length < 0 || static_cast<long>(response.body().size()) == o.expect_length)) {
                ++r.ok;
            } else {
                r.failed(r.err_status, "status=" + std::to_string(response.result_int()) +
                                           " origin_header=" + (from_origin ? "yes" : "nil") +
                                           " body_len=" + std::to_string(response.body().size()));
            }
            reusable = response.keep_alive();
        }
        if (reusable) {  // close_notify, as a well-behaved client leaves; the peer's is not awaited long
            asio::steady_timer limit(ex, std::chrono::milliseconds(200));
            co_await (stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec)) ||
                      limit.async_wait(asio::redirect_error(asio::use_awaitable, ec)));
        }
    }
}

std::uint32_t percentile(const std::vector<std::uint32_t>& sorted, double p) {
    if (sorted.empty()) return 0;
    const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    asio::io_context io(1);
    ssl::context tls(ssl::context::tls_client);
    tls.load_verify_file(o.cafile);
    tls.set_verify_mode(ssl::verify_peer);
    const auto target = tcp::resolver(io).resolve(o.target_host, o.target_port);

    results r;
    r.latencies_us.reserve(1 << 20);
    const auto start = clock_type::now();
    r.measured_from = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.warmup));
    const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(
                                      std::chrono::duration<double>(o.seconds));
    int running = o.connections;
    // A connection that stops answering must not hold the run: 10 s past the deadline
    // whatever is still open counts as timed out.
    asio::steady_timer watchdog(io, deadline + std::chrono::seconds(10));
    for (int i = 0; i < o.connections; ++i) {
        asio::co_spawn(io, client(o, tls, target, deadline, i, r), [&](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    r.failed(r.err_read, std::string("client: ") + x.what());
                }
            }
            if (--running == 0) watchdog.cancel();
        });
    }
    watchdog.async_wait([&](boost::system::error_code ec) {
        if (ec) return;
        r.err_timeout += static_cast<std::uint64_t>(running);
        r.bad += static_cast<std::uint64_t>(running);
        if (running > 0 && r.first_bad.empty()) r.first_bad = "no response 10 s past the end of the run";
        io.stop();
    });
    io.run();
    const auto duration_us = std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start).count();

    std::sort(r.latencies_us.begin(), r.latencies_us.end());
    std::sort(r.setups_us.begin(), r.setups_us.end());
    const auto& lat = r.latencies_us;
    double mean = 0;
    for (auto v : lat) mean += v;
    if (!lat.empty()) mean /= static_cast<double>(lat.size());
    std::string why;
    for (char c : r.first_bad) why += (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    std::printf("BENCH_JSON {\"requests\": %zu, \"duration_us\": %lld, \"bytes\": %llu, \"ok\": %llu, "
                "\"bad\": %llu, \"p50_us\": %u, \"p90_us\": %u, \"p99_us\": %u, \"max_us\": %u, \"mean_us\": %.1f, "
                "\"handshakes\": %llu, \"setup_p50_us\": %u, \"setup_p99_us\": %u, \"err_connect\": %llu, "
                "\"err_read\": %llu, \"err_write\": %llu, \"err_status\": %llu, \"err_timeout\": %llu, "
                "\"first_bad\": \"%s\"}\n",
                static_cast<std::size_t>(r.requests), static_cast<long long>(duration_us), u(r.bytes), u(r.ok), u(r.bad), percentile(lat, 50),
                percentile(lat, 90), percentile(lat, 99), lat.empty() ? 0u : lat.back(), mean, u(r.handshakes),
                percentile(r.setups_us, 50), percentile(r.setups_us, 99), u(r.err_connect), u(r.err_read),
                u(r.err_write), u(r.err_status), u(r.err_timeout), why.c_str());
    std::fflush(stdout);
    return r.bad > 0 || r.ok != r.requests ? 3 : 0;
}
