#pragma once
// A parked request, as the gates see it, and the wake-ups they owe parked requests.
// Private to proxy/exchange/ (the sources of host_gates).
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/manual_time.hpp"
#include "politeproxy/exchange/client_book.hpp"
#include "politeproxy/exchange/host_table.hpp"
#include "politeproxy/policy/gate.hpp"
#include "politeproxy/policy/group_gate.hpp"
#include "politeproxy/policy/group_ladder.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <memory>
#include <vector>

namespace politeproxy::gates_detail {

/// A parked request: the gate's intrusive node, its node in a group's queue, the group
/// slots it holds, and the timer its coroutine sleeps on.
struct parked_waiter : gate::waiter, group_gate::waiter, std::enable_shared_from_this<parked_waiter> {
    explicit parked_waiter(executor ex) : timer(std::move(ex)) {}
    gate::waiter& host_node() { return *this; }
    group_gate::waiter& group_node() { return *this; }
    steady_timer timer;
    group_ladder groups;
};

/// The parked requests a decision under a lock let go, or whose wait changed: each is
/// poked once the lock is let go (no lock is held while posting), when this object goes
/// out of scope. Declare it before the lock. A poke ends the waiter's timer wait on its
/// own executor (its session's worker loop); the coroutine then reads its state again.
/// Each waiter is kept alive until its poke has run.
///
/// Clients' caps (gate::client_news): a gate that set a client's lane aside registers with
/// the client (client_state::await_slot) and runs again, once the lock is let go, if a
/// slot came back meanwhile; a client that gave a slot back at its cap has the gates
/// registered with it run in turn until one takes the slot (host_gates::run_again).
class wakeups {
public:
    wakeups() = default;
    wakeups(const wakeups&) = delete;
    wakeups& operator=(const wakeups&) = delete;
    ~wakeups() { poke(); }

    void add(gate::waiter* w) { list_.push_back(static_cast<parked_waiter*>(w)->shared_from_this()); }
    void add(const std::vector<group_gate::waiter*>& granted) {
        for (group_gate::waiter* w : granted) list_.push_back(static_cast<parked_waiter*>(w)->shared_from_this());
    }
    /// Runs the host's gate (under the caller's lock) and keeps whom it woke. With a
    /// fleet, a store's node lost since the gates' last sweep counts as lost first: no
    /// waiter departs under the fleet's whole limit (host_gates::see_store_loss_locked).
    void run_gate(host_entry& e, clock::time_point now) {
        see_store_loss(e);
        woken_.clear();
        e.g.advance(now, woken_);
        for (gate::waiter* w : woken_) add(w);
        if (e.g.has_client_news()) note_clients(e);
    }
    /// Pokes now (for a caller that lets its locks go before this object ends); then runs
    /// the gates clients' caps call for (each under its own lock).
    void poke() {
        for (auto& w : list_) {
            auto& timer = w->timer;
            boost::asio::post(timer.get_executor(), [w = std::move(w)] { w->timer.cancel(); });
        }
        list_.clear();
        if (caps_) run_for_caps();
    }

private:
    static void see_store_loss(host_entry& e);  // host_gates.cpp

    // What clients' caps left to do once the lock is let go (rare: allocated when needed).
    struct cap_work {
        std::vector<std::shared_ptr<host_entry>> again;      ///< gates to run again
        std::vector<std::shared_ptr<client_state>> freed;  ///< clients whose slot came back
    };

    void note_clients(host_entry& e) {
        gate::client_news news;
        e.g.take_client_news(news);
        if (!caps_) caps_ = std::make_unique<cap_work>();
        for (client_account* c : news.freed) caps_->freed.push_back(static_cast<client_state*>(c)->shared_from_this());
        bool again = false;
        for (client_account* c : news.capped) again = static_cast<client_state*>(c)->await_slot(e.shared_from_this()) || again;
        if (again) caps_->again.push_back(e.shared_from_this());  // a slot came back meanwhile: once the lock is let go
    }
    void run_for_caps() {
        const auto work = std::move(caps_);
        for (const auto& host : work->again) run_again(*host);
        for (const auto& client : work->freed)
            // Its slot to the gates waiting for it, in turn, until one takes it.
            while (client->may_hold())
                if (auto host = client->next_waiting_host()) run_again(*host);
                else break;
    }
    static void run_again(host_entry& e);  // host_gates.cpp

    std::vector<std::shared_ptr<parked_waiter>> list_;
    std::vector<gate::waiter*> woken_;
    std::unique_ptr<cap_work> caps_;
};

/// Waits on `w`'s timer until `at` in `time`'s time, or until a poke ends the wait early
/// (the caller reads its state again either way). False: the waiting coroutine itself was
/// cancelled (its client left); a poke cancels the timer too, so only the coroutine's
/// cancellation state tells the two apart.
inline task<bool> sleep_until(const time_source& time, parked_waiter& w, clock::time_point at) {
    const auto armed = arm(time, w.timer, at);
    auto [ec] = co_await w.timer.async_wait(use_tuple);
    co_return !ec || (co_await boost::asio::this_coro::cancellation_state).cancelled() == boost::asio::cancellation_type::none;
}

}  // namespace politeproxy::gates_detail
