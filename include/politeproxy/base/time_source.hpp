#pragma once
// The time the exchange and its gates read and wait for, injected in one place (Envoy's
// adaptive concurrency filter takes a TimeSource the same way): the gates (host_gates)
// are made with one, and every exchange reads it through its permit. In the proxy it
// is the system's steady clock; in tests a manual_time (base/manual_time.hpp), which
// moves only when told to; base/manual_time.hpp also has arm(), how a wait is set on it.
//
// What it covers: every reading policy decides on (admission, token due times, pauses,
// queue deadlines, latencies reported as health, the fleet's backoff) and the waits of
// parked requests. What it does not: network deadlines (timed_socket, connects, an HTTP/2
// session's idle close) arm real timers against real sockets and stay on the system clock.
#include "politeproxy/base/clock.hpp"

namespace politeproxy {

class manual_time;
/// A manual_time's reading (out of line: only tests have one).
clock::time_point manual_now(const manual_time& m);

/// Where the time comes from: the system's steady clock (default), or a manual_time.
/// Cheap to copy; the manual_time must outlive it.
class time_source {
public:
    time_source() = default;
    explicit time_source(manual_time& manual) : manual_(&manual) {}

    clock::time_point now() const { return manual_ ? manual_now(*manual_) : clock::now(); }
    manual_time* manual() const { return manual_; }  ///< null: the system's clock

private:
    manual_time* manual_ = nullptr;
};

}  // namespace politeproxy
