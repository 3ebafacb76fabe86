#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"

namespace politeproxy {

/// Wakes the coroutines waiting on it, on one worker's loop (a timer that never
/// expires, cancelled to notify). Waiters check their condition before each wait: on a
/// single-threaded loop nothing can happen between the check and the wait, so no
/// notification is lost. `set()` makes it permanent (a stream that ended, a connection
/// that closed): wait() then returns at once.
class event {
public:
    explicit event(const executor& ex) : timer_(ex, steady_timer::time_point::max()) {}

    void notify() { timer_.cancel(); }
    void set() {
        set_ = true;
        timer_.cancel();
    }
    bool is_set() const { return set_; }

    /// Until the next notify() or set().
    task<void> wait() {
        if (set_) co_return;
        co_await timer_.async_wait(use_tuple);
    }

    /// As wait(), but no later than `deadline`: false when it passed first.
    task<bool> wait_until(clock::time_point deadline);

private:
    steady_timer timer_;
    bool set_ = false;
};

}  // namespace politeproxy
