#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"

#include <optional>

namespace politeproxy {

/// Wakes the coroutines waiting on it, on one worker's loop (a timer, cancelled to
/// notify, made at the first wait: most of a stream's events are never waited on).
/// Waiters check their condition before each wait: on a single-threaded loop nothing can
/// happen between the check and the wait, so no notification is lost. A waiter that
/// shares the event with a lone timed waiter (wait_until) may also wake at that one's
/// deadline: every waiter checks its condition again after a wait, in a loop. `set()`
/// makes it permanent (a stream that ended, a connection that closed): wait() then
/// returns at once, and until_set() waits for it.
class event {
public:
    explicit event(const executor& ex) : executor_(ex) {}

    void notify() {
        if (timer_) timer_->cancel();
    }
    void set() {
        set_ = true;
        notify();
    }
    bool is_set() const { return set_; }

    /// Until the next notify() or set().
    task<void> wait();
    /// Until set() (or until the waiting coroutine is cancelled).
    task<void> until_set();

    /// As wait(), but no later than `deadline`: false when it passed first. The one
    /// waiter of an event (a stream's own) waits on the event's timer set to expire at
    /// the deadline; a waiter that joins others races a timer of its own against it.
    task<bool> wait_until(clock::time_point deadline);

private:
    steady_timer& timer();

    executor executor_;
    std::optional<steady_timer> timer_;  ///< at a lone timed wait's deadline during it (and after, if no one else waits)
    int waiters_ = 0;
    bool set_ = false;
};

}  // namespace politeproxy
