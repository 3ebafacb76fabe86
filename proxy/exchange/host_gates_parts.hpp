#pragma once
// What the sources of host_gates share, private to proxy/exchange/: the place among
// limits.max_parked, the Retry-After hint, and the loop that re-applies every host's
// limits. The sources, one concern each: host_gates.cpp (admission, release, health
// reports, shutdown), host_gates_limits.cpp (what sets each host's limits: lookup with its
// config, reload, stream ceilings), host_gates_fleet.cpp (the thin coroutine around
// policy/fleet_line), host_gates_robots.cpp (robots.txt turns), wakeups.hpp (parked
// requests and their wake-ups).
#include "politeproxy/exchange/host_gates.hpp"
#include "wakeups.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

namespace politeproxy {
namespace gates_detail {
namespace asio = boost::asio;

// A 503 for a store outage, for limits.max_parked, or at shutdown suggests this retry.
constexpr auto fleet_retry_after = std::chrono::seconds(1);
constexpr auto parked_retry_after = std::chrono::seconds(1);
constexpr auto shutdown_retry_after = std::chrono::seconds(1);
constexpr auto client_retry_after = std::chrono::seconds(1);

// One place among limits.max_parked, held while a request waits at a gate (whatever
// ends the wait gives it back).
class parked_place {
public:
    parked_place(std::atomic<std::size_t>& count, std::size_t max) {
        auto n = count.load(std::memory_order_relaxed);
        do {
            if (n >= max) return;
        } while (!count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
        count_ = &count;
    }
    parked_place(const parked_place&) = delete;
    parked_place& operator=(const parked_place&) = delete;
    ~parked_place() {
        if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
    }
    explicit operator bool() const { return count_ != nullptr; }

private:
    std::atomic<std::size_t>* count_ = nullptr;
};

inline clock::duration retry_after_hint(const host_entry& e, clock::time_point now) {
    // Roughly how long the queue ahead needs to drain, or the pause. The host serves at
    // most `rate` per second and, with responses taking p95, `limit / p95` per second.
    double per_second = e.g.limits().rate;
    if (const auto p95 = e.health.p95(); p95 && *p95 > clock::duration::zero())
        per_second = std::min(per_second, static_cast<double>(e.g.limit()) / std::chrono::duration<double>(*p95).count());
    const double seconds = std::ceil(static_cast<double>(e.g.waiting() + 1) / per_second);
    const auto drain = std::chrono::seconds(static_cast<long>(std::clamp(seconds, 1.0, 3600.0)));
    // Not the gate's: a robots.txt hold is not a pause; an operator's (live override) is.
    const auto paused_until = e.paused_until();
    const auto pause = paused_until > now ? paused_until - now : clock::duration::zero();
    return std::max<clock::duration>(drain, pause);
}

}  // namespace gates_detail

template <class F>
void host_gates::for_some_entries_reapplying(host_table::pass_cursor& at, std::size_t slots, F&& f) {
    auto& s = table_.at(at.shard);
    gates_detail::wakeups wake;  // poked once the lock is let go
    std::lock_guard lock(s.mutex);
    const auto now = time_.now();
    const auto [first, end] = host_table::take_slice(s, at, slots);
    for (std::size_t i = first; i < end; ++i)
        if (host_entry* e = s.entries.at(i)) {
            f(*e, now, wake);
            apply_health(*e, now);
            wake.run_gate(*e, now);
        }
}

template <class F>
void host_gates::for_each_entry_reapplying(F&& f) {
    for (host_table::pass_cursor at; !at.done();) for_some_entries_reapplying(at, std::numeric_limits<std::size_t>::max(), f);
}

}  // namespace politeproxy
