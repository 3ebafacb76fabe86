#pragma once
#include <boost/intrusive/list.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace politeproxy {

/// One group key's slots (`groups.domain`, `groups.ip`): a concurrency cap across the
/// hosts of one registrable domain or one address, with a FIFO wait queue. No tokens and
/// no pause: rates stay per host.
///
/// Algorithm: a request takes a free slot at once when nobody is parked (`try_take`),
/// else parks (`enqueue`); `advance` grants freed slots to the parked in arrival order.
/// A lowered limit never touches slots held; it only stops replacing them.
///
/// Sans-io. Locking: none inside; the owner serialises every call (group_gates).
class group_gate {
public:
    enum class waiter_state : std::uint8_t { idle, queued, granted };

    class waiter : public boost::intrusive::list_base_hook<> {
    public:
        waiter_state state() const { return state_; }
        /// A granted slot now belongs to the waiter's owner (a group_ladder): back to idle.
        void accept() { state_ = waiter_state::idle; }

    private:
        friend class group_gate;
        waiter_state state_ = waiter_state::idle;
    };

    explicit group_gate(std::size_t limit) : limit_(limit) {}
    group_gate(const group_gate&) = delete;
    group_gate& operator=(const group_gate&) = delete;
    ~group_gate() { queue_.clear(); }

    /// A slot at once: one is free and nobody is parked ahead.
    bool try_take();
    void enqueue(waiter& w);
    /// Leaves the queue; a slot granted but not yet accepted is given back. Call
    /// advance() afterwards.
    void cancel(waiter& w);
    /// A held slot comes back. Call advance() afterwards.
    void release();
    /// Grants free slots in FIFO order; appends each granted waiter to `granted`.
    void advance(std::vector<waiter*>& granted);

    void set_limit(std::size_t limit) { limit_ = limit; }
    std::size_t limit() const { return limit_; }
    std::size_t in_flight() const { return in_flight_; }
    std::size_t waiting() const { return queue_.size(); }
    bool idle() const { return in_flight_ == 0 && queue_.empty(); }

private:
    std::size_t limit_;
    std::size_t in_flight_ = 0;
    boost::intrusive::list<waiter> queue_;
};

}  // namespace politeproxy
