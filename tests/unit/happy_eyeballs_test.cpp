// connect_first on loopback: the first address that accepts wins whatever its place,
// every address is tried before a failure (the last error), an empty list fails, the
// deadline ends attempts that hang, and each attempt is counted by family and result.
#include "politeproxy/net/happy_eyeballs.hpp"

#include "politeproxy/admin/metrics_renderer.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/parent_set.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// A port on 127.0.0.1 nothing listens on (bound, then closed).
std::uint16_t closed_port(asio::io_context& ioc) {
    tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const auto port = a.local_endpoint().port();
    a.close();
    return port;
}

tcp::endpoint at(const char* address, std::uint16_t port) { return {asio::ip::make_address(address), port}; }

std::variant<boost::system::error_code, tcp_socket> race(asio::io_context& ioc, std::vector<tcp::endpoint> endpoints,
                                                         clock::duration delay, clock::duration timeout, metrics& m) {
    auto f = asio::co_spawn(ioc, connect_first(endpoints, delay, clock::now() + timeout, m), asio::use_future);
    ioc.run();
    ioc.restart();
    return f.get();
}

std::string rendered(const metrics& m) {
    const host_gates gates(std::make_shared<const config>());
    metrics_renderer r;
    return r.render(m, gates, parent_set(gates.time()), 0);
}

}  // namespace

TEST_CASE("the first address that accepts wins; refused ones before it are counted as failed") {
    asio::io_context ioc{1};
    metrics m;
    tcp::acceptor listening(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const auto port = listening.local_endpoint().port();
    const auto closed = closed_port(ioc);
    auto won = race(ioc, {at("127.0.0.1", closed), at("127.0.0.1", closed), at("127.0.0.1", port)}, 250ms, 5s, m);
    REQUIRE(std::holds_alternative<tcp_socket>(won));
    CHECK(std::get<tcp_socket>(won).remote_endpoint().port() == port);
    const auto text = rendered(m);
    CHECK(text.find("politeproxy_connect_attempts_total{family=\"ipv4\",result=\"failed\"} 2") != std::string::npos);
    CHECK(text.find("politeproxy_connect_attempts_total{family=\"ipv4\",result=\"ok\"} 1") != std::string::npos);
}

TEST_CASE("every address is tried before a failure: the last attempt's error") {
    asio::io_context ioc{1};
    metrics m;
    const auto closed = closed_port(ioc);
    auto lost = race(ioc, {at("127.0.0.1", closed), at("127.0.0.1", closed)}, 250ms, 5s, m);
    REQUIRE(std::holds_alternative<boost::system::error_code>(lost));
    CHECK(std::get<boost::system::error_code>(lost) == asio::error::connection_refused);
    CHECK(rendered(m).find("politeproxy_connect_attempts_total{family=\"ipv4\",result=\"failed\"} 2") != std::string::npos);
    auto none = race(ioc, {}, 250ms, 5s, m);
    REQUIRE(std::holds_alternative<boost::system::error_code>(none));
    CHECK(std::get<boost::system::error_code>(none) == asio::error::host_not_found);
}

TEST_CASE("an attempt that hangs: the next address after the delay wins, the hanging one is abandoned") {
    asio::io_context ioc{1};
    metrics m;
    // A listener that never accepts, its backlog filled: further attempts get no answer.
    tcp::acceptor full(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    full.listen(0);
    const auto hanging = full.local_endpoint().port();
    std::vector<int> fillers;  // non-blocking connects left pending
    for (int i = 0; i < 8; ++i) {
        fillers.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
        const auto e = at("127.0.0.1", hanging);
        ::connect(fillers.back(), e.data(), static_cast<socklen_t>(e.size()));
    }
    struct closer {
        std::vector<int>& fds;
        ~closer() {
            for (int fd : fds) ::close(fd);
        }
    } close_fillers{fillers};
    tcp::acceptor listening(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const auto start = clock::now();
    auto won = race(ioc, {at("127.0.0.1", hanging), at("127.0.0.1", listening.local_endpoint().port())}, 50ms, 5s, m);
    const auto took = clock::now() - start;
    REQUIRE(std::holds_alternative<tcp_socket>(won));
    CHECK(std::get<tcp_socket>(won).remote_endpoint().port() == listening.local_endpoint().port());
    CHECK(rendered(m).find("politeproxy_connect_attempts_total{family=\"ipv4\",result=\"abandoned\"} 1") !=
          std::string::npos);
    CHECK(took >= 50ms);  // the second started after the delay
    CHECK(took < 2s);
    // Both hanging, with a deadline: timed_out, both counted as timeouts.
    metrics m2;
    auto late = race(ioc, {at("127.0.0.1", hanging), at("127.0.0.1", hanging)}, 20ms, 200ms, m2);
    REQUIRE(std::holds_alternative<boost::system::error_code>(late));
    CHECK(std::get<boost::system::error_code>(late) == asio::error::timed_out);
    CHECK(rendered(m2).find("politeproxy_connect_attempts_total{family=\"ipv4\",result=\"timeout\"} 2") !=
          std::string::npos);
}
