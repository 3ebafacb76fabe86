#include "politeproxy/fleet/redis_connection.hpp"

#include "politeproxy/base/log.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <random>
#include <utility>

namespace politeproxy::fleet {
namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto reconnect_initial = std::chrono::milliseconds(100);
constexpr auto reconnect_max = std::chrono::seconds(2);
constexpr auto heartbeat = std::chrono::seconds(1);
constexpr std::size_t read_chunk = 16 * 1024;

}  // namespace

redis_connection::redis_connection(asio::io_context& ioc, redis_target target, clock::duration timeout,
                                   const logger& log, std::vector<std::string> setup, std::function<void(bool)> on_state)
    : ioc_(ioc),
      target_(std::move(target)),
      timeout_(timeout),
      log_(log),
      setup_(std::move(setup)),
      on_state_(std::move(on_state)),
      socket_(ioc.get_executor()),
      wake_writer_(ioc.get_executor()),
      backoff_timer_(ioc.get_executor()) {}

redis_connection::~redis_connection() = default;

void redis_connection::start() {
    asio::co_spawn(ioc_, run(), asio::detached);
}

void redis_connection::close_now() {
    stopped_ = true;
    up_.store(false, std::memory_order_release);
    boost::system::error_code ignored;
    socket_.close(ignored);
    backoff_timer_.cancel();
    wake_writer_.cancel();
    fail_all();
}

void redis_connection::retarget(redis_target target) {
    asio::post(ioc_, [this, target = std::move(target)]() mutable {
        if (stopped_) return;
        target_ = std::move(target);
        retargeted_ = true;
        ++generation_;  // a connect under way to the old target gives up
        boost::system::error_code ignored;
        socket_.close(ignored);  // the loops end; run() connects to the new target
        backoff_timer_.cancel();
    });
}

void redis_connection::send(std::string command, handler done) {
    if (ioc_.get_executor().running_in_this_thread()) {
        enqueue(std::move(command), std::move(done));
        return;
    }
    asio::post(ioc_, [this, command = std::move(command), done = std::move(done)]() mutable {
        enqueue(std::move(command), std::move(done));
    });
}

void redis_connection::enqueue(std::string command, handler done) {
    if (!up()) {
        done(errc::fleet_unavailable, {});
        return;
    }
    to_write_.push_back({std::move(command), std::move(done), clock::now()});
    if (to_write_.size() == 1) wake_writer_.cancel();
}

void redis_connection::set_up(bool up) {
    if (up_.exchange(up, std::memory_order_acq_rel) == up) return;
    log_.write(up ? log_level::info : log_level::warn, "fleet",
               std::string("store ") + target_.host + ":" + std::to_string(target_.port) + (up ? " up" : " down"));
    if (on_state_) on_state_(up);
}

void redis_connection::fail_all() {
    // Moved out first: a handler may send again (and must find the connection down).
    auto waiting = std::move(awaiting_);
    auto unsent = std::move(to_write_);
    awaiting_.clear();
    to_write_.clear();
    for (auto& p : waiting) p.done(errc::fleet_unavailable, {});
    for (auto& p : unsent) p.done(errc::fleet_unavailable, {});
}

task<void> redis_connection::run() {
    std::minstd_rand random(std::random_device{}());
    auto backoff = std::chrono::duration_cast<clock::duration>(reconnect_initial);
    while (!stopped_) {
        if (co_await connect_once()) {
            backoff = reconnect_initial;
            set_up(true);
            co_await (read_loop() || write_loop() || watchdog());
        }
        boost::system::error_code ignored;
        socket_.close(ignored);
        set_up(false);
        fail_all();
        reader_.reset();
        if (stopped_) break;
        if (std::exchange(retargeted_, false)) continue;
        // Jitter: a fleet that lost its store together does not come back in lockstep.
        const auto jittered = backoff / 2 + std::chrono::duration_cast<clock::duration>(
                                                backoff * std::uniform_real_distribution<double>(0, 0.5)(random));
        backoff_timer_.expires_after(jittered);
        co_await backoff_timer_.async_wait(use_tuple);
        backoff = std::min<clock::duration>(backoff * 2, reconnect_max);
    }
}

task<bool> redis_connection::connect_once() {
    // The whole set-up (look-up, connect, AUTH, SELECT, PING) within one timeout: the
    // deadline closes the socket, which ends whatever step is waiting.
    steady_timer deadline(ioc_.get_executor());
    deadline.expires_after(timeout_);
    bool expired = false;
    deadline.async_wait([this, &expired](boost::system::error_code ec) {
        if (ec) return;
        expired = true;
        boost::system::error_code ignored;
        socket_.close(ignored);
    });
    struct cancel_on_exit {
        steady_timer& t;
        ~cancel_on_exit() { t.cancel(); }
    } cancel{deadline};

    const auto started_generation = generation_;
    asio::ip::basic_resolver<asio::ip::tcp, executor> resolver(ioc_.get_executor());
    auto [rec, endpoints] = co_await resolver.async_resolve(target_.host, std::to_string(target_.port), use_tuple);
    // Retargeted meanwhile: what was looked up is the old target's.
    auto stale = [&] { return expired || stopped_ || started_generation != generation_; };
    if (rec || stale()) co_return false;
    bool connected = false;
    for (const auto& e : endpoints) {
        boost::system::error_code ignored;
        socket_.close(ignored);
        auto [cec] = co_await socket_.async_connect(e.endpoint(), use_tuple);
        if (stale()) co_return false;
        if ((connected = !cec)) break;
    }
    if (!connected) co_return false;
    boost::system::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);

    std::string hello;
    std::size_t replies = 1;
    if (!target_.password.empty()) {
        hello += redis_command({"AUTH", target_.password});
        ++replies;
    }
    if (target_.db != 0) {
        hello += redis_command({"SELECT", std::to_string(target_.db)});
        ++replies;
    }
    hello += redis_command({"PING"});
    for (const auto& command : setup_) {
        hello += command;
        ++replies;
    }
    auto [wec, written] = co_await asio::async_write(socket_, asio::buffer(hello), use_tuple);
    if (wec) co_return false;
    std::string buffer(read_chunk, '\0');
    while (replies > 0) {
        auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), use_tuple);
        if (ec || !reader_.feed({buffer.data(), n})) co_return false;
        redis_reply reply;
        while (replies > 0) {
            const auto got = reader_.next(reply);
            if (got == redis_reply_reader::status::broken) co_return false;
            if (got == redis_reply_reader::status::need_more) break;
            if (reply.is_error()) {
                log_.write(log_level::error, "fleet", "store refused the connection set-up: " + reply.text);
                co_return false;
            }
            --replies;
        }
    }
    last_sent_ = clock::now();
    co_return !stale();
}

task<void> redis_connection::read_loop() {
    std::string buffer(read_chunk, '\0');
    for (;;) {
        auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), use_tuple);
        if (ec) co_return;
        reader_.feed({buffer.data(), n});
        for (;;) {
            redis_reply reply;
            const auto got = reader_.next(reply);
            if (got == redis_reply_reader::status::broken) {
                log_.write(log_level::error, "fleet", "unparseable or oversized reply from the store");
                co_return;
            }
            if (got == redis_reply_reader::status::need_more) break;
            if (on_push_ && reply.type == redis_reply::kind::array && !reply.elements.empty() &&
                reply.elements[0].text == "message") {
                on_push_(reply);
                continue;
            }
            if (awaiting_.empty()) co_return;  // a reply nobody asked for: out of step
            auto p = std::move(awaiting_.front());
            awaiting_.pop_front();
            p.done({}, std::move(reply));
        }
    }
}

task<void> redis_connection::write_loop() {
    std::string out;
    for (;;) {
        while (to_write_.empty()) {
            wake_writer_.expires_at(clock::time_point::max());
            co_await wake_writer_.async_wait(use_tuple);
            if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) co_return;
            if (stopped_) co_return;
        }
        // Everything queued goes out in one write: pipelining.
        out.clear();
        for (auto& p : to_write_) {
            out += p.command;
            p.command = {};
            awaiting_.push_back(std::move(p));
        }
        to_write_.clear();
        last_sent_ = clock::now();
        auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(out), use_tuple);
        if (ec) co_return;
    }
}

task<void> redis_connection::watchdog() {
    steady_timer tick(ioc_.get_executor());
    const auto period = std::max<clock::duration>(timeout_ / 8, std::chrono::milliseconds(1));
    for (;;) {
        tick.expires_after(period);
        if (auto [ec] = co_await tick.async_wait(use_tuple); ec) co_return;
        const auto now = clock::now();
        const auto oldest = !awaiting_.empty() ? awaiting_.front().queued
                            : !to_write_.empty() ? to_write_.front().queued
                                                 : clock::time_point::max();
        if (oldest != clock::time_point::max() && now - oldest > timeout_) {
            log_.write(log_level::warn, "fleet", "the store left a command unanswered for fleet.timeout");
            co_return;
        }
        if (awaiting_.empty() && to_write_.empty() && now - last_sent_ >= heartbeat) {
            to_write_.push_back({redis_command({"PING"}), [](boost::system::error_code, redis_reply) {}, now});
            wake_writer_.cancel();
        }
    }
}

}  // namespace politeproxy::fleet
