#include "politeproxy/net/happy_eyeballs.hpp"

#include "politeproxy/base/metrics.hpp"

#include <boost/asio/this_coro.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// The attempts of one connect, shared with their handlers (all on the caller's loop).
struct race {
    explicit race(const executor& ex) : wake(ex) {}
    enum class state : std::uint8_t { running, connected, failed };
    struct attempt {
        tcp_socket socket;
        bool ipv6;
        state now = state::running;
    };
    steady_timer wake;  ///< the caller's: poked when an attempt ends
    std::vector<std::unique_ptr<attempt>> attempts;
    boost::system::error_code last_error = asio::error::host_unreachable;
};

}  // namespace

task<std::variant<boost::system::error_code, tcp_socket>> connect_first(std::span<const tcp::endpoint> endpoints,
                                                                         clock::duration attempt_delay,
                                                                         clock::time_point deadline, metrics& m) {
    auto r = std::make_shared<race>(co_await asio::this_coro::executor);
    std::size_t next = 0;
    auto start_next = [&] {
        const auto& e = endpoints[next++];
        auto& a = *r->attempts.emplace_back(
            std::make_unique<race::attempt>(race::attempt{tcp_socket(r->wake.get_executor()), e.address().is_v6()}));
        a.socket.async_connect(e, [r, &a](boost::system::error_code ec) {
            if (a.now != race::state::running) return;  // closed by the race's end
            a.now = ec ? race::state::failed : race::state::connected;
            if (ec) r->last_error = ec;
            r->wake.cancel();
        });
    };
    auto end_others = [&](const race::attempt* winner, attempt_result how) {
        for (auto& a : r->attempts) {
            if (a.get() == winner) continue;
            if (a->now == race::state::running) {
                a->now = race::state::failed;
                boost::system::error_code ignored;
                a->socket.close(ignored);
                m.connect_attempt(a->ipv6, how);
            }
        }
    };
    if (endpoints.empty()) co_return asio::error::host_not_found;
    start_next();
    auto last_start = clock::now();
    for (;;) {
        // Ended attempts: a winner, or failures to count (and a next address at once).
        bool failed_now = false, running = false;
        for (auto& a : r->attempts) {
            if (a->now == race::state::connected) {
                m.connect_attempt(a->ipv6, attempt_result::ok);
                end_others(a.get(), attempt_result::abandoned);
                co_return std::move(a->socket);
            }
            running = running || a->now == race::state::running;
        }
        for (auto it = r->attempts.begin(); it != r->attempts.end();) {
            if ((*it)->now == race::state::failed) {
                m.connect_attempt((*it)->ipv6, attempt_result::failed);
                it = r->attempts.erase(it);
                failed_now = true;
            } else {
                ++it;
            }
        }
        const auto now = clock::now();
        if (now >= deadline) {
            end_others(nullptr, attempt_result::timeout);
            co_return asio::error::timed_out;
        }
        if (next < endpoints.size() && (failed_now || !running || now >= last_start + attempt_delay)) {
            start_next();
            last_start = now;
            continue;
        }
        if (!running) co_return r->last_error;  // every address tried
        r->wake.expires_at(next < endpoints.size() ? std::min(deadline, last_start + attempt_delay) : deadline);
        co_await r->wake.async_wait(use_tuple);
        const auto state = co_await asio::this_coro::cancellation_state;
        if (state.cancelled() != asio::cancellation_type::none) {
            end_others(nullptr, attempt_result::abandoned);
            co_return asio::error::operation_aborted;
        }
    }
}

}  // namespace politeproxy
