#include "politeproxy/base/event.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace politeproxy {

namespace {

// Counts a coroutine among the event's waiters while it waits.
struct waiting {
    explicit waiting(int& waiters) : waiters_(waiters) { ++waiters_; }
    ~waiting() { --waiters_; }
    waiting(const waiting&) = delete;
    waiting& operator=(const waiting&) = delete;
    int& waiters_;
};

}  // namespace

steady_timer& event::timer() {
    if (!timer_) timer_.emplace(executor_, steady_timer::time_point::max());
    return *timer_;
}

task<void> event::wait() {
    if (set_) co_return;
    steady_timer& t = timer();
    // A lone timed wait that ended left the timer at its deadline.
    if (waiters_ == 0 && t.expiry() != steady_timer::time_point::max()) t.expires_at(steady_timer::time_point::max());
    const waiting counted(waiters_);
    co_await t.async_wait(use_tuple);
}

task<bool> event::wait_until(clock::time_point deadline) {
    using namespace boost::asio::experimental::awaitable_operators;
    if (set_) co_return true;
    if (clock::now() >= deadline) co_return false;
    steady_timer& t = timer();
    if (waiters_ == 0) {
        // Alone: the timer itself expires at the deadline, and notify() cancels it. No
        // second timer, no race of two operations (its spawns, its cancellation slots).
        t.expires_at(deadline);
        const waiting counted(waiters_);
        const auto [ec] = co_await t.async_wait(use_tuple);
        co_return ec == boost::asio::error::operation_aborted;
    }
    constexpr auto awaitable = boost::asio::as_tuple(boost::asio::use_awaitable_t<executor>());
    steady_timer alarm(executor_, deadline);
    const waiting counted(waiters_);
    const auto first = co_await (t.async_wait(awaitable) || alarm.async_wait(awaitable));
    co_return first.index() == 0;
}

}  // namespace politeproxy
