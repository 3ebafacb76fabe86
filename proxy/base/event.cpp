#include "politeproxy/base/event.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>

namespace politeproxy {

// A waiter is counted in waiters_ while it waits. The count goes down after the wait as
// a statement, never in a destructor: a coroutine frame destroyed while it waits (a
// worker's loop shutting down) may outlive the event's owner, and must not touch it.

steady_timer& event::timer() {
    if (!timer_) timer_.emplace(executor_, steady_timer::time_point::max());
    return *timer_;
}

task<void> event::wait() {
    if (set_) co_return;
    steady_timer& t = timer();
    // A lone timed wait that ended with no one else waiting left the timer at its deadline.
    if (waiters_ == 0 && t.expiry() != steady_timer::time_point::max()) t.expires_at(steady_timer::time_point::max());
    ++waiters_;
    try {
        co_await t.async_wait(use_tuple);
    } catch (...) {  // cancelled before the wait began
        --waiters_;
        throw;
    }
    --waiters_;
}

task<void> event::until_set() {
    // Cancelled (the loser of a race, as a parked request's watch is): it returns, as
    // wait() does, rather than wait again and throw.
    const auto cancellation = co_await boost::asio::this_coro::cancellation_state;
    while (!set_ && cancellation.cancelled() == boost::asio::cancellation_type::none) co_await wait();
}

task<bool> event::wait_until(clock::time_point deadline) {
    using namespace boost::asio::experimental::awaitable_operators;
    if (set_) co_return true;
    if (clock::now() >= deadline) co_return false;
    steady_timer& t = timer();
    bool notified = false;
    ++waiters_;
    try {
        if (waiters_ == 1) {
            // Alone: the timer itself expires at the deadline, and notify() cancels it. No
            // second timer, no race of two operations (its spawns, its cancellation slots).
            t.expires_at(deadline);
            const auto [ec] = co_await t.async_wait(use_tuple);
            notified = ec == boost::asio::error::operation_aborted;
            // Waiters that joined meanwhile share the timer: it must not stay at this
            // deadline, passed, for them (each would wake at once, again and again).
            if (waiters_ > 1 && t.expiry() != steady_timer::time_point::max())
                t.expires_at(steady_timer::time_point::max());
        } else {
            constexpr auto awaitable = boost::asio::as_tuple(boost::asio::use_awaitable_t<executor>());
            steady_timer alarm(executor_, deadline);
            notified = (co_await (t.async_wait(awaitable) || alarm.async_wait(awaitable))).index() == 0;
        }
    } catch (...) {  // cancelled before the wait began
        --waiters_;
        throw;
    }
    --waiters_;
    co_return notified;
}

}  // namespace politeproxy
