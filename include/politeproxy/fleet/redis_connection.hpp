#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/fleet/redis_reply.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

class logger;

namespace fleet {

/// Where the store is.
struct redis_target {
    std::string host;  ///< a name or an address
    std::uint16_t port = 6379;
    std::string password;
    unsigned db = 0;
};

/// One pipelined connection to a Redis server, owned by one io_context (a worker's loop):
/// commands queue up and go out together in one write; replies come back in order.
/// hiredis parses and formats the protocol (redis_reply.hpp); Asio does the I/O, so no
/// call blocks.
///
/// Up and down: the connection is up once it connected, authenticated, selected its
/// database and answered a PING, all within `timeout`. It goes down when the server
/// closes or resets it, sends something unparseable, or leaves a command unanswered for
/// `timeout` (a hung server: SIGSTOP, a full network); every command waiting then fails
/// with errc::fleet_unavailable, and so does every command sent while down. It then
/// reconnects with backoff (100 ms doubling to 2 s, with jitter). While idle it sends a
/// PING every second, so a hung store is noticed without traffic. `on_state(up)` is
/// called on the connection's thread at each change.
///
/// Thread safety: send() and up() from any thread; the rest on the io_context.
class redis_connection {
public:
    using handler = std::move_only_function<void(boost::system::error_code, redis_reply)>;

    /// `setup` (e.g. SCRIPT LOAD) is sent after the PING of every (re)connection, and
    /// must succeed before the connection counts as up.
    redis_connection(boost::asio::io_context& ioc, redis_target target, clock::duration timeout, const logger& log,
                     std::vector<std::string> setup, std::function<void(bool up)> on_state);
    ~redis_connection();
    redis_connection(const redis_connection&) = delete;
    redis_connection& operator=(const redis_connection&) = delete;

    /// Starts connecting (and reconnecting until closed).
    void start();
    /// From now on connects to `target` (a Sentinel's new master): the connection in use
    /// is closed (its commands fail) and the next one is made at once, without backoff.
    /// From any thread.
    void retarget(redis_target target);
    /// Pub/sub: a reply that is a `message` (an array whose first element is "message")
    /// goes to `push` instead of the command waiting. Before start().
    void on_push(std::function<void(const redis_reply&)> push) { on_push_ = std::move(push); }
    /// Closes the connection and fails every command waiting; no reconnect after. Only
    /// while no thread runs the io_context (shutdown, after the loops stopped).
    void close_now();
    bool up() const { return up_.load(std::memory_order_acquire); }

    /// Queues `command`; `done` runs on the connection's thread with its reply or an
    /// error. From the connection's own thread the command is queued at once (so the
    /// order of sends there is the order on the wire); from another, through a post.
    void send(std::string command, handler done);

private:
    struct pending {
        std::string command;
        handler done;
        clock::time_point queued;
    };

    task<void> run();
    task<bool> connect_once();
    task<void> read_loop();
    task<void> write_loop();
    task<void> watchdog();
    void set_up(bool up);
    void fail_all();
    void enqueue(std::string command, handler done);

    boost::asio::io_context& ioc_;
    redis_target target_;
    clock::duration timeout_;
    const logger& log_;
    std::vector<std::string> setup_;
    std::function<void(bool)> on_state_;
    std::function<void(const redis_reply&)> on_push_;
    bool retargeted_ = false;  ///< the next connect skips the backoff
    unsigned generation_ = 0;  ///< counts retargets: a connect to an older target gives up
    std::atomic<bool> up_{false};
    bool stopped_ = false;
    tcp_socket socket_;
    steady_timer wake_writer_;
    steady_timer backoff_timer_;
    redis_reply_reader reader_;
    std::deque<pending> to_write_;
    std::deque<pending> awaiting_;  ///< written, in reply order
    clock::time_point last_sent_{};
};

}  // namespace fleet
}  // namespace politeproxy
