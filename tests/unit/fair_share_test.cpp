// A host's slots shared among clients (policy/gate with clients, policy/fair_queue): who
// gets the next slot, the per-client caps, and what a lowered limit or a cancel does.
// Time is moved by hand; nothing sleeps.
#include "politeproxy/policy/gate.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

using namespace politeproxy;

namespace {

using state = gate::waiter_state;

gate_limits fair_limits(std::size_t concurrency, std::size_t max_waiting = 1000) {
    gate_limits l{concurrency, 1e9, 1e9, max_waiting};
    l.fair = true;
    return l;
}

struct request : gate::waiter {
    std::string who;
    bool seen_departing = false;
};

// Drives one gate as host_gates does: advance after every event; remembers the order in
// which requests departed.
struct host {
    gate g;
    std::deque<request> requests;  // stable addresses
    std::vector<gate::waiter*> woken;
    std::vector<request*> in_flight;
    std::vector<std::string> order;  // clients, in the order their requests departed
    std::vector<std::size_t> departed;  // indexes into requests, in that order

    explicit host(gate_limits l) : g(l, clock::time_point{}) {}

    gate::queued arrive(client_account& c) {
        request& r = requests.emplace_back();
        r.who = c.name();
        r.client = &c;
        const auto q = g.enqueue(r);
        if (q == gate::queued::yes) step();
        return q;
    }
    void step() {
        woken.clear();
        g.advance(clock::time_point{}, woken);
        for (auto& r : requests)
            if (r.state() == state::departed && !r.seen_departing) {
                r.seen_departing = true;
                in_flight.push_back(&r);
                order.push_back(r.who);
                departed.push_back(index_of(r));
            }
    }
    std::size_t index_of(const request& r) const {
        for (std::size_t i = 0; i < requests.size(); ++i)
            if (&requests[i] == &r) return i;
        return requests.size();
    }
    // The oldest request in flight finishes.
    void finish_one() {
        REQUIRE(!in_flight.empty());
        request* r = in_flight.front();
        in_flight.erase(in_flight.begin());
        g.release(r->client);
        step();
    }
    void cancel_all() {
        for (auto& r : requests) g.cancel(r);
    }
};

}  // namespace

TEST_CASE("a client's first request goes within one round, not behind another client's flood") {
    client_account a("A", 1, 100000, 100000), b("B", 1, 100000, 100000);
    host h(fair_limits(2, 10000));
    for (int i = 0; i < 2000; ++i) REQUIRE(h.arrive(a) == gate::queued::yes);
    REQUIRE(h.order.size() == 2);
    REQUIRE(h.arrive(b) == gate::queued::yes);
    // The next free slots: at most one of A's (the lane whose turn it is), then B's.
    h.finish_one();
    h.finish_one();
    CHECK(std::count(h.order.begin(), h.order.end(), "B") == 1);
    CHECK(h.order.size() == 4);
    CHECK(h.g.in_flight() == 2);  // fairness decides who, never how many
    // With B gone, A has every slot again.
    for (int i = 0; i < 10; ++i) h.finish_one();
    CHECK(h.g.in_flight() == 2);
    CHECK(std::count(h.order.begin() + 4, h.order.end(), "A") == 10);
    h.cancel_all();
    CHECK(a.waiting() == 0);
}

TEST_CASE("weights 4:1: four of the heavy client's for one of the light one's, round after round") {
    client_account heavy("heavy", 4, 100000, 100000), light("light", 1, 100000, 100000);
    host h(fair_limits(1, 100000));
    for (int i = 0; i < 2000; ++i) h.arrive(heavy);
    for (int i = 0; i < 2000; ++i) h.arrive(light);
    for (int i = 0; i < 1000; ++i) h.finish_one();
    std::map<std::string, int> served;
    for (std::size_t i = 1; i < h.order.size(); ++i) ++served[h.order[i]];  // the first went at once
    CHECK(served["heavy"] == 800);
    CHECK(served["light"] == 200);
    // Exact per round: never more than four heavy in a row while light waits.
    int run = 0;
    for (std::size_t i = 1; i < h.order.size(); ++i) {
        run = h.order[i] == "heavy" ? run + 1 : 0;
        CHECK(run <= 4);
    }
    h.cancel_all();
}

TEST_CASE("FIFO within a client, round robin between clients") {
    client_account a("A", 1, 100, 100), b("B", 1, 100, 100), c("C", 1, 100, 100);
    host h(fair_limits(1));
    h.arrive(a);  // departs at once
    for (client_account* who : {&a, &a, &b, &c, &b}) h.arrive(*who);
    for (int i = 0; i < 5; ++i) h.finish_one();
    CHECK(h.order == std::vector<std::string>{"A", "A", "B", "C", "A", "B"});
    // A's requests left in the order they came.
    std::vector<std::size_t> as;
    for (const std::size_t i : h.departed)
        if (h.requests[i].who == "A") as.push_back(i);
    CHECK(as == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("fifo: arrival order whatever the client") {
    client_account a("A", 1, 100, 100), b("B", 1, 100, 100);
    host h(gate_limits{1, 1e9, 1e9, 1000});
    h.arrive(a);
    for (client_account* who : {&a, &a, &a, &b}) h.arrive(*who);
    for (int i = 0; i < 4; ++i) h.finish_one();
    CHECK(h.order == std::vector<std::string>{"A", "A", "A", "A", "B"});
}

TEST_CASE("a full host queue refuses a client only past its share: another client's first request goes in") {
    client_account a("A", 1, 100, 100), b("B", 1, 100, 100);
    host h(fair_limits(1, 10));
    h.arrive(a);  // in flight
    for (int i = 0; i < 10; ++i) REQUIRE(h.arrive(a) == gate::queued::yes);
    CHECK(h.arrive(a) == gate::queued::host_full);
    // B's share of a full queue: 10 x 1/2.
    for (int i = 0; i < 5; ++i) CHECK(h.arrive(b) == gate::queued::yes);
    CHECK(h.arrive(b) == gate::queued::host_full);
    CHECK(a.waiting() == 10);
    CHECK(b.waiting() == 5);
    h.cancel_all();
    CHECK(a.waiting() == 0);
    CHECK(b.waiting() == 0);
}

TEST_CASE("clients.max_waiting counts a client's waiting requests across hosts") {
    client_account a("A", 1, 3, 100), b("B", 1, 3, 100);
    host one(fair_limits(1)), two(fair_limits(1));
    one.arrive(a);  // in flight: not waiting
    REQUIRE(one.arrive(a) == gate::queued::yes);
    two.arrive(a);  // in flight
    REQUIRE(two.arrive(a) == gate::queued::yes);
    REQUIRE(two.arrive(a) == gate::queued::yes);
    CHECK(a.waiting() == 3);
    CHECK(a.in_flight() == 2);
    CHECK(one.arrive(a) == gate::queued::client_full);
    CHECK(one.arrive(b) == gate::queued::yes);  // only A is over its cap
    // A slot taken: one of A's stops waiting, and A may park one more.
    one.finish_one();
    CHECK(one.order.back() == "A");
    CHECK(a.waiting() == 2);
    CHECK(one.arrive(a) == gate::queued::yes);
    one.cancel_all();
    two.cancel_all();
}

TEST_CASE("clients.max_in_flight: a capped client's lane is set aside, the slot goes to the next client") {
    client_account a("A", 1, 100, 1), b("B", 1, 100, 100);
    host one(fair_limits(2)), two(fair_limits(2));
    one.arrive(a);
    CHECK(a.in_flight() == 1);
    REQUIRE(two.arrive(a) == gate::queued::yes);  // A is at its cap: set aside
    CHECK(two.g.in_flight() == 0);
    gate::client_news news;
    two.g.take_client_news(news);
    CHECK(news.capped == std::vector<client_account*>{&a});
    two.arrive(b);  // B takes the free slot meanwhile
    CHECK(two.order == std::vector<std::string>{"B"});
    // A's request at `one` ends: the freed cap is news there; `two` runs again and A goes.
    one.finish_one();
    one.g.take_client_news(news = {});
    CHECK(news.freed == std::vector<client_account*>{&a});
    two.step();
    CHECK(two.order == std::vector<std::string>{"B", "A"});
    CHECK(a.in_flight() == 1);
    two.cancel_all();
}

TEST_CASE("try_depart respects the client's cap") {
    client_account a("A", 1, 100, 1);
    gate g(fair_limits(5), clock::time_point{});
    CHECK(g.try_depart(clock::time_point{}, &a));
    CHECK_FALSE(g.try_depart(clock::time_point{}, &a));
    CHECK(a.in_flight() == 1);
    g.release(&a);
    CHECK(a.in_flight() == 0);
    CHECK(g.try_depart(clock::time_point{}, &a));
    g.release(&a);
}

TEST_CASE("a lowered limit gives a slot back to the head of its client's lane, whose turn is next") {
    client_account a("A", 1, 100, 100), b("B", 1, 100, 100);
    gate_limits l = fair_limits(2);
    l.rate = 1;  // one token now, the next in 1 s: the second slot holder waits in the token line
    l.burst = 1;
    host h(l);
    h.arrive(a);  // departs with the token
    h.arrive(b);  // holds the second slot, waits for a token
    h.arrive(a);
    CHECK(b.in_flight() == 1);
    CHECK(h.requests[1].state() == state::holding_slot);
    l.concurrency = 1;
    h.g.set_limits(l, clock::time_point{});
    h.step();
    CHECK(h.requests[1].state() == state::queued);  // back in the queue
    CHECK(b.in_flight() == 0);
    CHECK(b.waiting() == 1);
    l.concurrency = 2;
    h.g.set_limits(l, clock::time_point{});
    h.step();
    CHECK(h.requests[1].state() == state::holding_slot);  // B's again, before A's second
    CHECK(h.requests[2].state() == state::queued);
    h.cancel_all();
    CHECK(b.in_flight() == 0);
    CHECK(a.waiting() == 0);
}

TEST_CASE("observe-only: every lane departs, counts move from waiting to holding") {
    client_account a("A", 1, 100, 100), b("B", 1, 100, 100);
    host h(fair_limits(1));
    h.arrive(a);
    h.arrive(a);
    h.arrive(b);
    CHECK(a.waiting() + b.waiting() == 2);
    gate_limits l = fair_limits(1);
    l.enforce = false;
    h.g.set_limits(l, clock::time_point{});
    h.step();
    CHECK(h.g.in_flight() == 3);
    CHECK(a.in_flight() == 2);
    CHECK(b.in_flight() == 1);
    CHECK(a.waiting() + b.waiting() == 0);
}

TEST_CASE("many clients come and go: each one's requests leave, lanes of gone clients do not hold the queue") {
    std::deque<client_account> clients;
    for (int i = 0; i < 1000; ++i) clients.emplace_back("c" + std::to_string(i), 1, 10, 10);
    host h(fair_limits(4, 100000));
    for (auto& c : clients) h.arrive(c);
    for (int i = 0; i < 996; ++i) h.finish_one();
    CHECK(h.order.size() == 1000);
    CHECK(h.g.waiting() == 0);
    // Every client once: a round of 1000 lanes, each its turn.
    std::map<std::string, int> seen;
    for (const auto& who : h.order) ++seen[who];
    CHECK(seen.size() == 1000);
}

TEST_CASE("a full host queue: never past twice max_waiting, however many clients come") {
    std::deque<client_account> clients;
    for (int i = 0; i < 100; ++i) clients.emplace_back("c" + std::to_string(i), 1, 100, 100);
    host h(fair_limits(1, 10));
    std::size_t admitted = 0;
    for (int round = 0; round < 3; ++round)
        for (auto& c : clients) admitted += h.arrive(c) == gate::queued::yes;
    CHECK(h.g.waiting() == 20);
    CHECK(admitted == 21);  // one in flight
    h.cancel_all();
}

TEST_CASE("a client over its max_waiting is told so, also at a full host") {
    client_account a("A", 1, 2, 100);
    host one(fair_limits(1, 2)), two(fair_limits(1, 2));
    one.arrive(a);
    REQUIRE(one.arrive(a) == gate::queued::yes);
    REQUIRE(one.arrive(a) == gate::queued::yes);
    CHECK(two.g.try_depart(clock::time_point{}, &a));  // departs at once: never waits
    CHECK(one.arrive(a) == gate::queued::client_full);
    two.g.release(&a);
    CHECK(a.waiting() == 2);
    one.cancel_all();
    two.cancel_all();
}
