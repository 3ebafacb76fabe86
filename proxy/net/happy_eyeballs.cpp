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
    enum class state : std::uint8_t { running, connected, failed, closed };
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
    // Every attempt but the winner still open (under way, or connected too late) is
    // closed and counted as `how`.
    auto end_others = [&](const race::attempt* winner, attempt_result how) {
        for (auto& a : r->attempts) {
            if (a.get() == winner || (a->now != race::state::running && a->now != race::state::connected)) continue;
            a->now = race::state::closed;
            boost::system::error_code ignored;
            a->socket.close(ignored);
            m.connect_attempt(a->ipv6, how);
        }
    };
    if (endpoints.empty()) co_return asio::error::host_not_found;
    start_next();
    auto last_start = clock::now();
    for (;;) {
        // Attempts that failed since the last look: counted, dropped (their handlers have
        // run), and the next address goes at once. Then the first that connected wins.
        bool failed_now = false;
        std::erase_if(r->attempts, [&](const std::unique_ptr<race::attempt>& a) {
            if (a->now != race::state::failed) return false;
            m.connect_attempt(a->ipv6, attempt_result::failed);
            failed_now = true;
            return true;
        });
        for (auto& a : r->attempts)
            if (a->now == race::state::connected) {
                m.connect_attempt(a->ipv6, attempt_result::ok);
                end_others(a.get(), attempt_result::abandoned);
                co_return std::move(a->socket);
            }
        const bool running = !r->attempts.empty();
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
