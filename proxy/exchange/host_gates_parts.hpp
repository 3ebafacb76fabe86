#pragma once
// What the sources of host_gates share, private to proxy/exchange/: the parked request's
// waiter and its wake-ups, the fleet's polling constants, the place among
// limits.max_parked, and the loop that re-applies every host's limits. The sources, one
// concern each: host_gates.cpp (the host table, admission, release, reload),
// host_gates_fleet.cpp (the fleet line), host_gates_robots.cpp (robots.txt turns),
// host_gates_table.cpp (eviction, stream ceilings, the admin snapshot).
#include "politeproxy/exchange/host_gates.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

namespace politeproxy {
namespace gates_detail {
namespace asio = boost::asio;

inline std::size_t shard_of(const std::string& key, std::size_t count) {
    return std::hash<std::string>{}(key) % count;
}

// A parked request: the gate's intrusive node, its node in a group's queue, the group
// slots it holds, and the timer its coroutine sleeps on.
struct async_waiter : gate::waiter, group_gate::waiter, std::enable_shared_from_this<async_waiter> {
    explicit async_waiter(executor ex) : timer(std::move(ex)) {}
    gate::waiter& host_node() { return *this; }
    group_gate::waiter& group_node() { return *this; }
    steady_timer timer;
    group_ladder groups;
};

using wake_list = std::vector<std::shared_ptr<async_waiter>>;

inline void add_woken(const std::vector<group_gate::waiter*>& granted, wake_list& wake) {
    for (group_gate::waiter* w : granted) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
}

// Runs the gate under the caller's lock and keeps the waiters it woke alive until
// the caller, after unlocking, pokes them.
inline void advance_locked(host_entry& e, clock::time_point now, wake_list& wake) {
    std::vector<gate::waiter*> woken;
    e.g.advance(now, woken);
    for (gate::waiter* w : woken) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
}

// The timer is only touched on the waiter's own executor (its session's worker loop), so the
// poke runs there: it interrupts the wait and the coroutine re-reads its state.
inline void poke(wake_list& wake) {
    for (auto& w : wake) {
        auto& timer = w->timer;
        asio::post(timer.get_executor(), [w = std::move(w)] { w->timer.cancel(); });
    }
    wake.clear();
}

// Asking the store again after a refusal: 5 ms, doubling up to 50 ms; never sleeping
// longer than keepalive (or the store forgets our place in its queue: acquire_script's
// waiter_stale), unless the host is paused. A 503 for a store outage suggests this retry.
constexpr auto fleet_poll_initial = std::chrono::milliseconds(5);
constexpr auto fleet_poll_max = std::chrono::milliseconds(50);
constexpr auto fleet_place_keepalive = std::chrono::milliseconds(200);
constexpr auto fleet_retry_after = std::chrono::seconds(1);
constexpr auto parked_retry_after = std::chrono::seconds(1);

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
    const auto paused_until = e.health.paused_until();  // not the gate's: a robots.txt hold is not a pause
    const auto pause = paused_until > now ? paused_until - now : clock::duration::zero();
    return std::max<clock::duration>(drain, pause);
}

}  // namespace gates_detail

template <class F>
void host_gates::for_each_entry_reapplying(F&& f) {
    for (auto& s : shards_) {
        gates_detail::wake_list wake;
        {
            std::lock_guard lock(s.mutex);
            const auto now = time_.now();
            for (auto& [key, e] : s.entries) {
                f(*e, now, wake);  // whom to wake goes in `wake`: poked once the lock is let go
                apply_health(*e, now);
                gates_detail::advance_locked(*e, now, wake);
            }
        }
        gates_detail::poke(wake);
    }
}


}  // namespace politeproxy
