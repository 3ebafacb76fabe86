#pragma once
// A clock that moves only when a test says so, and how a wait is set on whichever time a
// time_source gives (base/time_source.hpp says what the time covers).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/time_source.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace politeproxy {

class manual_time;

/// A wait armed on a manual_time: while it lives, advancing the time past its moment ends
/// the wait of its timer. Move-only; empty on the system clock.
class alarm {
public:
    alarm() = default;
    alarm(alarm&& other) noexcept : time_(other.time_), id_(other.id_) { other.time_ = nullptr; }
    alarm& operator=(alarm&&) = delete;
    ~alarm();

private:
    friend class manual_time;
    alarm(manual_time* t, std::uint64_t id) : time_(t), id_(id) {}
    manual_time* time_ = nullptr;
    std::uint64_t id_ = 0;
};

/// A clock that moves only when a test says so. Thread-safe: advance() may be called from
/// any thread; the waits it ends are ended on their timers' own executors, by handlers
/// that refer to it: it must outlive every io_context its alarms' timers run on (declare
/// it before them).
class manual_time {
public:
    /// Starts an hour past the clock's epoch, so `now - 1min` is a valid time point too.
    explicit manual_time(clock::time_point start = clock::time_point(std::chrono::hours(1)))
        : now_(start.time_since_epoch().count()) {}
    manual_time(const manual_time&) = delete;
    manual_time& operator=(const manual_time&) = delete;

    clock::time_point now() const { return clock::time_point(clock::duration(now_.load(std::memory_order_acquire))); }
    /// Moves the time on by `d`, ending the wait of every timer armed for a moment reached.
    void advance(clock::duration d);

    /// Sets `timer` to wait until `at` in this time: it never expires by itself; advance()
    /// cancels it when `at` is reached (at once if it has been).
    alarm arm(steady_timer& timer, clock::time_point at);

private:
    friend class alarm;
    struct armed {
        clock::time_point at;
        steady_timer* timer;  ///< touched only on `ex`, the thread its alarm lives on
        executor ex;
        bool rung = false;
    };
    void disarm(std::uint64_t id);
    /// Ends the wait of alarm `id` on its timer's executor, if it is still armed then.
    void ring(std::uint64_t id, const executor& ex);

    std::atomic<clock::rep> now_;
    std::mutex mutex_;
    std::unordered_map<std::uint64_t, armed> armed_;
    std::uint64_t next_id_ = 1;
};

/// Sets `timer` to end its wait at `at` in `time`'s time. Keep the alarm until the wait
/// ends. The wait may also end early (a cancel): re-read the time after it.
[[nodiscard]] inline alarm arm(const time_source& time, steady_timer& timer, clock::time_point at) {
    if (manual_time* m = time.manual()) return m->arm(timer, at);
    timer.expires_at(at);
    return {};
}

}  // namespace politeproxy
