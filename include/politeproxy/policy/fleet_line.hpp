#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/policy/gate.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace politeproxy {

/// One host's line for fleet leases in this process, and what the fleet store last said
/// of the host: plain state, no I/O (the sans-io half; host_gates::lease is the thin
/// coroutine that carries its decisions out, as Boost.Redis splits exec_fsm from its
/// connection). Events and `now` go in: a request joins or leaves, the store answers, a
/// lease is taken or given back. Decisions come out: who asks the store, when the head
/// asks again, whom to wake, whether to withdraw from the store's queue.
///
/// Algorithm. Requests holding their local slot and token wait here in arrival order;
/// only the head asks the store, so a host has one round trip in flight per process.
/// After a refusal the head asks again when the store says a token or the end of a
/// pause is due; otherwise after a backoff of 5 ms doubling to 50 ms (reset for each new
/// head), and, unless the host is paused fleet-wide, never later than 200 ms, or the
/// store forgets its place in the fleet's queue (acquire_script's waiter_stale). When the head leaves, the next one asks at
/// once; the last one to leave without a lease withdraws the host from the store's queue.
///
/// Locking: none; host_gates calls it under the host's shard lock.
class fleet_line {
public:
    static constexpr clock::duration poll_initial = std::chrono::milliseconds(5);
    static constexpr clock::duration poll_max = std::chrono::milliseconds(50);
    static constexpr clock::duration place_keepalive = std::chrono::milliseconds(200);

    /// The store's answer to the head's ask.
    struct answer {
        bool granted = false;
        std::size_t held = 0;  ///< leases held fleet-wide, this process's included
        clock::duration token_in{};    ///< refused: the fleet's next token is due then (zero: unknown)
        clock::duration paused_for{};  ///< refused: the host is paused that long fleet-wide
    };
    /// What leaving the line asks of the caller.
    struct departure {
        gate::waiter* wake = nullptr;  ///< the new head: it asks at once
        bool withdraw = false;         ///< nobody is left asking: take the host out of the store's queue
    };

    void join(gate::waiter& w) { state().line.push_back(&w); }
    departure leave(gate::waiter& w, bool granted);
    bool empty() const { return !s_ || s_->line.empty(); }
    std::size_t size() const { return s_ ? s_->line.size() : 0; }
    bool is_head(const gate::waiter& w) const { return head() == &w; }
    gate::waiter* head() const { return empty() ? nullptr : s_->line.front(); }
    /// Every waiter, head first (the store came or went: each looks again).
    template <class F>
    void for_each(F&& f) const {
        if (s_)
            for (gate::waiter* w : s_->line) f(*w);
    }

    /// The store answered an ask for this host at `now` (the head's, or one made at once
    /// before a request joined the line): its counts; granted, the lease is this process's.
    void heard(const answer& a, clock::time_point now);
    /// The head's own ask was refused at `now`: when it asks again (its backoff grows).
    clock::time_point head_refused(const answer& a, clock::time_point now);
    /// The store's count of the host's leases, heard at `now` (a renewal's answer).
    void heard_held(std::size_t held, clock::time_point now);
    /// A lease taken without asking (the store unreachable: asserted when it is back).
    void leased_unasked() { ++state().leased; }
    /// One of this process's leases went back.
    void returned();

    /// The store's node for this host is reachable (`up`) or not, as of `now`: a loss
    /// starts the hold (fleet_share), which runs lease_ttl from it.
    void store_reach(bool up, clock::time_point now) {
        if (up && !s_) return;  // nothing to remember
        if (!up && !state().down) s_->lost_at = now;
        state().down = !up;
    }
    bool store_down() const { return s_ && s_->down; }
    /// When the store was last lost for this host, if ever.
    std::optional<clock::time_point> lost_at() const { return s_ ? s_->lost_at : std::nullopt; }

    std::size_t leased() const { return s_ ? s_->leased : 0; }  ///< this process's requests holding a lease
    std::optional<std::size_t> held() const { return s_ ? s_->held : std::nullopt; }  ///< fleet-wide, as last heard
    std::size_t others() const { return s_ ? s_->others : 0; }  ///< other processes' leases, as last heard
    clock::time_point heard_at() const { return s_ ? s_->heard_at : clock::time_point{}; }

private:
    // Made at the line's first event: a host of a process without a fleet (or one never
    // asked for) holds a null pointer, not 96 bytes (a million idle hosts).
    struct line_state {
        std::vector<gate::waiter*> line;  ///< short (at most the local limit)
        clock::duration backoff = poll_initial;  ///< the current head's
        std::size_t leased = 0;
        std::optional<std::size_t> held;
        std::size_t others = 0;
        clock::time_point heard_at{};
        bool down = false;
        std::optional<clock::time_point> lost_at;
    };
    line_state& state() {
        if (!s_) s_ = std::make_unique<line_state>();
        return *s_;
    }

    std::unique_ptr<line_state> s_;
};

}  // namespace politeproxy
