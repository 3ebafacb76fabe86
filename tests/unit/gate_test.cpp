#include "politeproxy/policy/gate.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <vector>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

using state = gate::waiter_state;

gate_limits limits(std::size_t concurrency, double rate = 1000, double burst = 1000, std::size_t max_waiting = 1000) {
    return {concurrency, rate, burst, max_waiting};
}

// Drives a gate the way host_gates does: advance after every event.
struct driver {
    std::deque<gate::waiter> waiters;  // stable addresses; outlive the gate's lists
    gate g;
    clock::time_point now{};
    std::vector<gate::waiter*> woken;

    explicit driver(gate_limits l) : g(l, clock::time_point{}) {}

    gate::waiter& arrive() {
        auto& w = waiters.emplace_back();
        REQUIRE(g.enqueue(w) == gate::queued::yes);
        step();
        return w;
    }
    void step() {
        woken.clear();
        g.advance(now, woken);
    }
    void finish() {
        g.release();
        step();
    }
    std::size_t departed() const {
        return static_cast<std::size_t>(std::count_if(waiters.begin(), waiters.end(),
                                                      [](const auto& w) { return w.state() == state::departed; }));
    }
};

}  // namespace

TEST_CASE("never more in flight than the limit, and FIFO order") {
    driver d(limits(2));
    for (int i = 0; i < 5; ++i) d.arrive();
    CHECK(d.g.in_flight() == 2);
    CHECK(d.g.waiting() == 3);
    CHECK(d.waiters[0].state() == state::departed);
    CHECK(d.waiters[1].state() == state::departed);
    CHECK(d.waiters[2].state() == state::queued);
    d.finish();
    CHECK(d.waiters[2].state() == state::departed);
    CHECK(d.waiters[3].state() == state::queued);
    CHECK(d.g.in_flight() == 2);
    CHECK(d.woken == std::vector<gate::waiter*>{&d.waiters[2]});
}

TEST_CASE("slot first, then token: the token line holds slots, the slot queue holds no tokens") {
    driver d(limits(3, 1.0, 1.0));  // 1 token per second, bucket of 1
    for (int i = 0; i < 5; ++i) d.arrive();
    // One token: one departs, two hold slots waiting for tokens, two queue for slots.
    CHECK(d.g.in_flight() == 1);
    CHECK(d.waiters[1].state() == state::holding_slot);
    CHECK(d.waiters[2].state() == state::holding_slot);
    CHECK(d.waiters[3].state() == state::queued);
    // Only the head of the token line is told when its token is due.
    CHECK(d.waiters[1].wake_at() > d.now);
    CHECK(d.waiters[1].wake_at() <= d.now + 1s + 1us);
    CHECK(d.waiters[2].wake_at() == clock::time_point::max());
    // A slot coming free does not let a queued request jump the token line.
    d.finish();
    CHECK(d.waiters[3].state() == state::holding_slot);
    CHECK(d.g.in_flight() == 0);
    d.now = d.waiters[1].wake_at();
    d.step();
    CHECK(d.waiters[1].state() == state::departed);
    CHECK(d.waiters[2].state() == state::holding_slot);
    CHECK(d.waiters[2].wake_at() > d.now);
}

TEST_CASE("the rate spaces departures even with free slots") {
    driver d(limits(10, 5.0, 1.0));
    for (int i = 0; i < 11; ++i) d.arrive();
    std::vector<clock::time_point> departures{d.now};
    d.finish();  // fast requests: each is done before the next token
    while (d.departed() < 11) {
        auto next = clock::time_point::max();
        for (auto& w : d.waiters)
            if (w.state() == state::holding_slot) next = std::min(next, w.wake_at());
        REQUIRE(next != clock::time_point::max());
        const auto before = d.departed();
        d.now = next;
        d.step();
        REQUIRE(d.departed() == before + 1);
        departures.push_back(d.now);
        d.finish();
    }
    for (std::size_t i = 1; i < departures.size(); ++i) {
        CHECK(departures[i] - departures[i - 1] >= 200ms);
        CHECK(departures[i] - departures[i - 1] < 201ms);
    }
}

TEST_CASE("raising the limit admits waiters at once") {
    driver d(limits(1));
    for (int i = 0; i < 4; ++i) d.arrive();
    CHECK(d.g.in_flight() == 1);
    d.g.set_limits(limits(3), d.now);
    d.step();
    CHECK(d.g.in_flight() == 3);
    CHECK(d.woken.size() == 2);
}

TEST_CASE("lowering the limit cancels nothing in flight, it stops replacing") {
    driver d(limits(4));
    for (int i = 0; i < 6; ++i) d.arrive();
    CHECK(d.g.in_flight() == 4);
    d.g.set_limits(limits(2), d.now);
    d.step();
    CHECK(d.g.in_flight() == 4);  // nothing cancelled
    d.finish();
    d.finish();
    CHECK(d.g.in_flight() == 2);  // nothing replaced while above the new limit
    CHECK(d.waiters[4].state() == state::queued);
    d.finish();
    CHECK(d.g.in_flight() == 2);  // now under it: one replaced
    CHECK(d.waiters[4].state() == state::departed);
}

TEST_CASE("a cancelled waiter leaves the queue and is never granted") {
    driver d(limits(1));
    d.arrive();
    auto& second = d.arrive();
    auto& third = d.arrive();
    d.g.cancel(second);
    d.step();
    CHECK(second.state() == state::idle);
    CHECK(d.g.waiting() == 1);
    d.finish();
    CHECK(second.state() == state::idle);
    CHECK(third.state() == state::departed);
}

TEST_CASE("cancelling a waiter that holds a slot passes the slot on") {
    driver d(limits(2, 1.0, 1.0));
    d.arrive();                 // departs with the only token
    auto& holder = d.arrive();  // holds a slot, waits for a token
    auto& queued = d.arrive();  // waits for a slot
    REQUIRE(holder.state() == state::holding_slot);
    REQUIRE(queued.state() == state::queued);
    d.g.cancel(holder);
    d.step();
    CHECK(queued.state() == state::holding_slot);
    CHECK(queued.wake_at() != clock::time_point::max());  // it is now the token head
}

TEST_CASE("max_waiting bounds the parked requests") {
    gate g(limits(1, 1000, 1000, 2), clock::time_point{});
    std::vector<gate::waiter*> woken;
    gate::waiter a, b, c, e;
    REQUIRE(g.enqueue(a) == gate::queued::yes);
    g.advance({}, woken);
    CHECK(g.enqueue(b) == gate::queued::yes);
    CHECK(g.enqueue(c) == gate::queued::yes);
    CHECK(g.enqueue(e) == gate::queued::host_full);
    CHECK(e.state() == state::idle);
    g.cancel(b);
    g.cancel(c);
}

TEST_CASE("idle only when nothing is in flight or parked and the bucket is full") {
    driver d(limits(1, 1.0, 1.0));
    CHECK(d.g.idle(d.now));
    d.arrive();
    CHECK_FALSE(d.g.idle(d.now));
    d.finish();
    CHECK_FALSE(d.g.idle(d.now));  // forgetting it now would hand out a fresh token
    CHECK(d.g.idle(d.now + 1s));
}

TEST_CASE("a paused gate keeps its waiters parked, then lets them go at its limit") {
    driver d(limits(3));
    d.g.set_pause(d.now + 2s);
    for (int i = 0; i < 5; ++i) d.arrive();
    CHECK(d.g.in_flight() == 0);
    CHECK(d.g.waiting() == 5);
    CHECK(d.waiters[0].wake_at() == d.now + 2s);  // the token head wakes when the pause ends
    d.g.set_limits(limits(1), d.now);             // collapsed meanwhile
    d.now += 2s;
    d.step();
    CHECK(d.g.in_flight() == 1);
    CHECK(d.waiters[0].state() == state::departed);
    // Slots taken during the pause but not used go back, in order, to the queue.
    CHECK(d.waiters[1].state() == state::queued);
    CHECK(d.waiters[2].state() == state::queued);
    d.finish();
    CHECK(d.waiters[1].state() == state::departed);
    CHECK(d.waiters[2].state() == state::queued);
}

TEST_CASE("observe-only forwards at once and counts what would have waited") {
    gate_limits l = limits(2, 1.0, 1.0);
    l.enforce = false;
    driver d(l);
    for (int i = 0; i < 10; ++i) d.arrive();
    CHECK(d.departed() == 10);
    CHECK(d.g.in_flight() == 10);
    CHECK(d.g.would_have_waited() == 9);  // one slot and one token were free for the first
}

TEST_CASE("try_depart only lets a request skip the queue when it would not wait") {
    driver d(limits(1, 1.0, 1.0));
    CHECK(d.g.try_depart(d.now));
    CHECK(d.g.in_flight() == 1);
    CHECK_FALSE(d.g.try_depart(d.now));  // no slot
    d.g.release();
    CHECK_FALSE(d.g.try_depart(d.now));  // slot, but no token yet
    auto& parked = d.arrive();
    d.now += 2s;
    CHECK_FALSE(d.g.try_depart(d.now));  // someone is parked: FIFO
    d.step();
    CHECK(parked.state() == state::departed);
    d.g.set_pause(d.now + 10s);
    d.g.release();
    d.now += 5s;
    CHECK_FALSE(d.g.try_depart(d.now));  // paused
}
