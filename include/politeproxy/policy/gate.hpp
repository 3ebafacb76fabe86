#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/policy/client_account.hpp"
#include "politeproxy/policy/fair_queue.hpp"
#include "politeproxy/policy/token_bucket.hpp"

#include <boost/intrusive/list.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace politeproxy {

/// The limits one gate enforces.
struct gate_limits {
    std::size_t concurrency = 2;  ///< slots: requests in flight at once
    double rate = 1.0;            ///< tokens per second
    double burst = 1.0;           ///< bucket size
    std::size_t max_waiting = 1000;  ///< parked requests beyond this are refused (see Clients)
    bool enforce = true;  ///< false: observe only; everyone departs at once (see advance)
    bool fair = false;    ///< clients.share: fair (see Clients); else one FIFO queue
};

/// One host key's concurrency slots, token bucket and wait queue.
///
/// Algorithm: a request parks as a `waiter` at the back of the slot queue. `advance()`
/// moves waiters from the slot queue to the token line (through the group line, see
/// Groups) while the slots held (in flight + group line + token line) are under the
/// limit, in the slot queue's order (policy/fair_queue: FIFO, or round robin among
/// clients); then lets the token line
/// depart in order while the bucket has tokens. A waiter in the token line already holds
/// its slot (slot first, then token), so a token is never spent on a request that is
/// still queueing for a slot. The head of the token line is told when the next token is
/// due (`wake_at`), and is expected to call `advance()` again then.
///
/// Changing the limit takes effect at the next `advance()`: raising it admits waiters at
/// once; lowering it never touches requests in flight, it only stops replacing them
/// (waiters in the group and token lines beyond the new limit go back to the front of
/// the queue).
/// While paused (`set_pause`), waiters still take free slots but no token is handed out
/// until the pause ends; the token head is told to wake then.
///
/// Groups: a waiter enqueued with `needs_groups` goes from the slot queue to the group
/// line, holding its slot, and is woken to take its group slots (group_ladder); once it
/// holds them, `groups_granted` moves it to the token line. A lowered limit takes slots
/// back from the group line first, then from the token line; a grouped waiter taken back
/// is woken, so that its owner gives its group slots back (host slot first, group slots
/// after it: a request never holds a group slot without its host slot for longer than it
/// takes to notice). While the host is paused its waiters take no group slots (and give
/// back those they hold): one throttled host does not starve the rest of its group.
///
/// Observe-only (`enforce` false): every waiter departs at once, and the ones the limits
/// would have parked are counted in `would_have_waited()`; the bucket is consumed as if
/// enforced, so the count matches what enforcement would do.
///
/// Clients (a waiter's `client`, see client_account): with `fair`, the slot queue keeps a
/// lane per client and the next free slot goes to the client whose turn it is (weighted
/// round robin, policy/fair_queue); fairness decides who goes next, never how many. The
/// gate keeps each client's counts: waiting while in the slot queue, holding from when it
/// takes its slot until release() (or until a slot taken back returns it to waiting). A
/// client at its max_in_flight takes no slot: its lane is set aside and the slot goes to
/// the next client; the gate notes it (`client_news`), and its owner runs the gate again
/// when the client's count falls (a client's slot given back anywhere is noted too).
/// max_waiting: a queue holding max_waiting refuses a request only when its client already
/// has its share of them (fair_queue::share_of), so one client's flood never refuses
/// another client's first request, and always at twice max_waiting; a client at its own
/// max_waiting is refused everywhere. FIFO (`fair` false): one lane; a request whose
/// client is at its max_in_flight holds the queue behind it (nobody overtakes in FIFO).
///
/// Sans-io: no timers or sockets; time is an argument. The caller owns the waiters and
/// must `cancel()` any waiter that has not departed before destroying it.
///
/// Locking: none inside; the owner serialises every call (see host_gates).
class gate {
public:
    enum class waiter_state : std::uint8_t { idle, queued, awaiting_groups, holding_slot, departed };

    class waiter : public fair_queue::node {
    public:
        waiter_state state() const { return state_; }
        /// When this waiter should call advance() again; max() = only when woken.
        clock::time_point wake_at() const { return wake_at_; }

    private:
        friend class gate;
        waiter_state state_ = waiter_state::idle;
        bool needs_groups_ = false;
        clock::time_point wake_at_ = clock::time_point::max();
    };

    gate(const gate_limits& limits, clock::time_point now);
    gate(const gate&) = delete;
    gate& operator=(const gate&) = delete;
    ~gate();

    /// A request that would not wait at all departs at once, without parking: nothing is
    /// parked ahead of it, a slot and a token are free, the host is not paused, its client
    /// (null: none) is under its max_in_flight (and in observe-only mode, always). False:
    /// park it with enqueue().
    bool try_depart(clock::time_point now, client_account* client = nullptr);
    /// Whether try_depart() would succeed at `now` (an enforcing gate), changing nothing.
    bool would_depart(clock::time_point now) const;

    enum class queued : std::uint8_t { yes, host_full, client_full };
    /// Parks `w` (of `w.client`) at the back of the queue, or says why not (`w` untouched):
    /// the host's queue is full (see Clients), or its client's max_waiting is reached.
    /// With `needs_groups`, `w` stops in the group line after its slot (see above).
    queued enqueue(waiter& w, bool needs_groups = false);

    /// `w` (in the group line) holds its group slots: it joins the token line. Call
    /// advance() afterwards.
    void groups_granted(waiter& w);

    /// Takes a waiter that has not departed out of the gate, giving back its slot if it
    /// held one. Call advance() afterwards: the freed slot may admit the next waiter.
    void cancel(waiter& w);

    /// A departed request (of `client`) finished: its slot is free. Call advance() afterwards.
    void release(client_account* client = nullptr);

    /// Grants slots (in the slot queue's order) and tokens (in the token line's). Appends to
    /// `woken` every waiter that departed or whose wake_at changed; the caller wakes them.
    void advance(clock::time_point now, std::vector<waiter*>& woken);

    /// Takes effect at the next advance().
    void set_limits(const gate_limits& limits, clock::time_point now);
    void set_pause(clock::time_point until) { paused_until_ = until; }
    clock::time_point paused_until() const { return paused_until_; }
    std::uint64_t would_have_waited() const { return would_have_waited_; }

    /// Visits every parked waiter (slot queue, group line and token line).
    template <class F>
    void for_each_waiter(F&& f) {
        for (auto& w : token_line_) f(w);
        for (auto& w : group_line_) f(w);
        slot_queue_.for_each([&f](fair_queue::node& n) { f(static_cast<waiter&>(n)); });
    }
    /// The slot queue's lanes: f(client, waiting, set_aside).
    template <class F>
    void for_each_lane(F&& f) const {
        slot_queue_.for_each_lane(f);
    }

    /// What happened to clients' caps since the last call: `capped`, clients whose lanes
    /// were set aside at their max_in_flight (the gate must run again once each may hold
    /// a slot); `freed`, clients that were at their max_in_flight and gave a slot back
    /// (gates that set their lanes aside may go on). Empty unless clients have caps met.
    struct client_news {
        std::vector<client_account*> capped;
        std::vector<client_account*> freed;
        bool empty() const { return capped.empty() && freed.empty(); }
    };
    bool has_client_news() const { return news_ && !news_->empty(); }
    /// Moves the news into `out` (what `out` held is dropped).
    void take_client_news(client_news& out);

    std::size_t limit() const { return limits_.concurrency; }
    const gate_limits& limits() const { return limits_; }
    std::size_t in_flight() const { return in_flight_; }
    std::size_t waiting() const { return slot_queue_.size() + group_line_.size() + token_line_.size(); }
    /// Nothing in flight, nothing parked, bucket full: forgetting this gate changes nothing.
    bool idle(clock::time_point now) const;

private:
    void depart(waiter& w, std::vector<waiter*>& woken);
    /// Nothing parked ahead, a slot free, not paused (the token aside).
    bool slot_free(clock::time_point now) const {
        return slot_queue_.empty() && group_line_.empty() && token_line_.empty() && in_flight_ < limits_.concurrency &&
               now >= paused_until_;
    }
    std::size_t slots_held() const { return in_flight_ + group_line_.size() + token_line_.size(); }
    /// A lowered limit, or a pause for waiters with groups: the newest slot holders that
    /// have not departed go back to the front of the queue.
    void take_back(bool paused, std::vector<waiter*>& woken);
    void advance_observing(clock::time_point now, std::vector<waiter*>& woken);
    /// `client` (null: none) gives back its slot; noted when it was at its cap.
    void unhold(client_account* client) {
        if (client && client->unhold()) news().freed.push_back(client);
    }

    using waiter_list = boost::intrusive::list<waiter>;

    gate_limits limits_;
    token_bucket bucket_;
    std::size_t in_flight_ = 0;
    clock::time_point paused_until_{};
    std::uint64_t would_have_waited_ = 0;
    fair_queue slot_queue_;
    waiter_list group_line_;  ///< holding a slot, taking group slots
    waiter_list token_line_;
    std::unique_ptr<client_news> news_;  ///< made at the first news: most gates never have any
    client_news& news() {
        if (!news_) news_ = std::make_unique<client_news>();
        return *news_;
    }
};

}  // namespace politeproxy
