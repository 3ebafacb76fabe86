#pragma once
// The queue of a gate's requests waiting for a slot: a lane per client, served in
// weighted round robin (clients.share: fair), or one lane (FIFO).
#include "politeproxy/policy/client_account.hpp"

#include <boost/intrusive/list.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace politeproxy {

/// Deficit round robin over clients' lanes (Shreedhar and Varghese, 1996), FIFO within a
/// lane.
///
/// Why DRR and not start-time fair queuing. Every request costs the same here: one slot
/// (how long it holds it is not known when the slot is given, and the host's bound, not
/// a byte budget, is what is shared). With unit costs DRR's deficit is a count: a lane
/// at its turn takes up to `weight` requests, then goes to the back of the ring; each
/// choice is O(1) whatever the number of clients, and a weight is an exact share over
/// every round (4:1 gives 4 and 1 per round). SFQ gives the same long-run shares and
/// interleaves a heavy lane's requests more finely, but each choice is O(log n) in a
/// priority queue keyed by virtual start times, which also have to be kept sane across
/// idle periods and reloads. What SFQ's finer interleaving would buy (a newcomer served
/// within one request instead of one round) is bounded here by a round of the waiting
/// clients' weights, a few slots, since a lane joins the ring as soon as it has a request.
///
/// Rules. A lane joins the back of the ring with a credit of its client's weight
/// (clients.weights, read again when it goes to the back of the ring for its next turn:
/// a reload applies from then). A
/// lane's request taken back (the host lowered its limit) goes to the head of its lane,
/// its lane first in the ring, the credit refunded. A lane whose client is at its
/// clients.max_in_flight is set aside (out of the ring, keeping its credit) until the
/// gate's next turn (`bring_back`). An emptied lane leaves the ring and loses
/// its credit (DRR: no banking while idle); its memory is kept for reuse, up to as many
/// idle lanes as busy ones (and at least 4).
///
/// Sans-io; no locking inside (the gate's owner serialises every call).
class fair_queue {
    struct lane;

public:
    /// A request in the queue (gate::waiter derives from it).
    class node : public boost::intrusive::list_base_hook<> {
    public:
        /// Whose request: its lane when the queue is fair; null: nobody's (no clients
        /// configured, or the proxy's own robots.txt fetch), a lane of its own.
        client_account* client = nullptr;

    private:
        friend class fair_queue;
        lane* lane_ = nullptr;
    };

    fair_queue();
    ~fair_queue();
    fair_queue(const fair_queue&) = delete;
    fair_queue& operator=(const fair_queue&) = delete;

    /// Fair (a lane per client) or FIFO (one lane); a change applies to requests that
    /// join from now on.
    void set_fair(bool fair) { fair_ = fair; }

    void push_back(node& n) {
        lane* l = last_;
        if (!l || l->key != (fair_ ? n.client : nullptr) || l->where != place::ring) return push_back_slow(n);
        l->waiters.push_back(n);  // the common case: its client's lane is waiting already
        n.lane_ = l;
        ++size_;
    }
    /// `n` (served a moment ago) goes back to the head of its lane, whose turn is next.
    void push_front(node& n);
    /// Whose turn it is: the head of the ring's first lane; null when every waiting lane
    /// is set aside, or none waits.
    node* next() { return ring_.empty() ? nullptr : &ring_.front().waiters.front(); }
    /// Takes next() out, charging its lane.
    void pop_next() {
        lane& l = ring_.front();
        l.waiters.pop_front();  // its lane_ is read only while it is queued
        --size_;
        if (!l.waiters.empty()) {
            if (l.credit > 1) {
                --l.credit;
                return;
            }
            if (&ring_.back() == &l) {  // alone in the ring: its next turn at once
                l.credit = l.weight;
                return;
            }
        }
        turn_over(l);
    }
    /// next()'s lane waits for its client's cap: out of the ring (see bring_back).
    void set_aside_next();
    /// Lanes set aside rejoin the back of the ring, for their clients' caps to be tried
    /// again (a lane whose client is still at its cap is set aside again, and its gate
    /// says so again: that is what keeps it registered for the client's next free slot).
    void bring_back() {
        if (!aside_.empty()) bring_back_all();
    }
    void erase(node& n);

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    /// How many of `client`'s requests are waiting, and how many the host's max_waiting
    /// gives it when the queue is full: max_waiting times its weight over the weights of
    /// the clients waiting (itself included), at least 1. FIFO: the whole queue.
    std::size_t waiting_of(client_account* client) const;
    std::size_t share_of(client_account* client, std::size_t max_waiting) const;

    template <class F>
    void for_each(F&& f) {
        if (!lanes_) return;
        for (auto& [key, l] : *lanes_)
            for (auto& n : l->waiters) f(n);
    }
    /// f(client, waiting, set_aside) for each lane with requests.
    template <class F>
    void for_each_lane(F&& f) const {
        if (!lanes_) return;
        for (const auto& [key, l] : *lanes_)
            if (!l->waiters.empty()) f(key, l->waiters.size(), l->where == place::aside);
    }

private:
    using node_list = boost::intrusive::list<node>;
    enum class place : std::uint8_t { idle, ring, aside };
    struct lane : boost::intrusive::list_base_hook<> {
        client_account* key = nullptr;
        node_list waiters;
        unsigned credit = 0;
        unsigned weight = 1;  ///< as counted in weights_
        place where = place::idle;
    };
    using lane_list = boost::intrusive::list<lane, boost::intrusive::constant_time_size<false>>;
    using lane_map = std::unordered_map<client_account*, std::unique_ptr<lane>>;

    lane& lane_of(client_account* key);
    const lane* find(client_account* client) const;  ///< null: none
    void push_back_slow(node& n);
    /// `l` (the ring's first) was served its last credit, or emptied.
    void turn_over(lane& l);
    void bring_back_all();
    void join_ring(lane& l, bool first, unsigned credit);
    void leave(lane& l);
    static unsigned weight_of(const client_account* key) { return key ? key->weight() : 1; }

    // Small: a million idle hosts hold one each (host_entry_block). 32 bits hold any
    // count: at most 2 x queue.max_waiting wait (gate.cpp), and the config caps that at 1e9.
    bool fair_ = false;
    std::uint32_t size_ = 0;
    std::uint32_t busy_ = 0;        ///< lanes in the ring or set aside
    std::uint32_t idle_count_ = 0;  ///< lanes in idle_
    std::size_t weights_ = 0;       ///< of the lanes in the ring or set aside
    /// Made at the first lane: a host none of whose requests ever waited has none.
    std::unique_ptr<lane_map> lanes_;
    lane* last_ = nullptr;  ///< the lane last looked up (most gates see one client at a time)
    lane_list ring_;
    lane_list aside_;
    lane_list idle_;
};

}  // namespace politeproxy
