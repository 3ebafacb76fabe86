#include "politeproxy/policy/gate.hpp"
#include "politeproxy/policy/group_ladder.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <vector>

using namespace politeproxy;
using namespace std::chrono_literals;

TEST_CASE("group gate: a free slot at once, the rest in arrival order") {
    group_gate g(2);
    CHECK(g.try_take());
    CHECK(g.try_take());
    CHECK_FALSE(g.try_take());
    group_gate::waiter a, b;
    g.enqueue(a);
    g.enqueue(b);
    std::vector<group_gate::waiter*> granted;
    g.advance(granted);
    CHECK(granted.empty());
    g.release();
    g.advance(granted);
    CHECK(granted == std::vector<group_gate::waiter*>{&a});
    CHECK(a.state() == group_gate::waiter_state::granted);
    CHECK(b.state() == group_gate::waiter_state::queued);
    // A slot granted to a request that gives up goes on to the next.
    g.cancel(a);
    granted.clear();
    g.advance(granted);
    CHECK(granted == std::vector<group_gate::waiter*>{&b});
    CHECK(g.in_flight() == 2);
}

TEST_CASE("group ladder: parked at one level it holds only the levels before it") {
    auto domain = std::make_shared<group_gate>(1);
    auto ip = std::make_shared<group_gate>(1);
    group_ladder first, second;
    first.set_levels(domain, ip);
    second.set_levels(domain, ip);
    group_gate::waiter n1, n2;
    CHECK(first.climb(n1));
    CHECK(first.held() == 2);
    CHECK_FALSE(second.climb(n2));
    CHECK(second.held() == 0);  // parked at the domain: holds no ip slot
    CHECK(n2.state() == group_gate::waiter_state::queued);
    CHECK(ip->in_flight() == 1);

    // Given back in reverse: ip, then domain; the domain's slot goes to the parked one.
    std::vector<group_gate::waiter*> granted;
    group_gate::waiter none;
    first.descend(none, granted);
    CHECK(granted == std::vector<group_gate::waiter*>{&n2});
    CHECK(second.climb(n2));  // collects the domain slot, then takes the free ip slot
    CHECK(second.held() == 2);
    CHECK(domain->in_flight() == 1);
    CHECK(ip->in_flight() == 1);

    // All or nothing at once.
    group_ladder third;
    third.set_levels(nullptr, ip);
    CHECK_FALSE(third.try_take_all());
    CHECK(third.held() == 0);
    granted.clear();
    second.descend(none, granted);
    CHECK(third.try_take_all());
    CHECK(domain->idle());
}

TEST_CASE("gate with groups: the slot, then the groups (woken for them), then the token") {
    gate g({2, 1.0, 1.0, 100}, clock::time_point{});
    gate::waiter a, b;
    REQUIRE(g.enqueue(a, true) == gate::queued::yes);
    REQUIRE(g.enqueue(b, true) == gate::queued::yes);
    std::vector<gate::waiter*> woken;
    g.advance(clock::time_point{}, woken);
    CHECK(a.state() == gate::waiter_state::awaiting_groups);
    CHECK(b.state() == gate::waiter_state::awaiting_groups);
    CHECK(woken == std::vector<gate::waiter*>{&a, &b});  // to climb their ladders
    CHECK_FALSE(g.would_depart(clock::time_point{}));
    g.groups_granted(b);  // b got its group slots first: b spends the token first
    woken.clear();
    g.advance(clock::time_point{}, woken);
    CHECK(b.state() == gate::waiter_state::departed);
    CHECK(a.state() == gate::waiter_state::awaiting_groups);
    g.groups_granted(a);
    woken.clear();
    g.advance(clock::time_point{}, woken);
    CHECK(a.state() == gate::waiter_state::holding_slot);  // the next token is 1 s away
    CHECK(a.wake_at() > clock::time_point{});
    CHECK(a.wake_at() <= clock::time_point{} + 1s + 1us);

    // A lowered limit takes the unused slot back and wakes its holder, who gives its
    // group slots back.
    g.set_limits({1, 1.0, 1.0, 100}, clock::time_point{});
    woken.clear();
    g.advance(clock::time_point{}, woken);
    CHECK(a.state() == gate::waiter_state::queued);
    CHECK(woken == std::vector<gate::waiter*>{&a});
    g.cancel(a);
}

TEST_CASE("gate with groups: a paused host takes no group slots and gives back those it holds") {
    const clock::time_point t0{};
    gate g({2, 1.0, 1.0, 100}, t0);
    gate::waiter a, b;
    REQUIRE(g.enqueue(a, true) == gate::queued::yes);
    REQUIRE(g.enqueue(b, true) == gate::queued::yes);
    std::vector<gate::waiter*> woken;
    g.advance(t0, woken);
    g.groups_granted(a);  // a holds its group slots, waits for the token line
    g.set_pause(t0 + 5s);  // a 429's Retry-After
    woken.clear();
    g.advance(t0, woken);
    CHECK(a.state() == gate::waiter_state::queued);  // both back in the queue: a gives its group slots back
    CHECK(b.state() == gate::waiter_state::queued);
    CHECK(std::find(woken.begin(), woken.end(), &a) != woken.end());
    CHECK(a.wake_at() == t0 + 5s);  // the head looks again when the pause ends
    woken.clear();
    g.advance(t0 + 5s, woken);
    CHECK(a.state() == gate::waiter_state::awaiting_groups);
    CHECK(b.state() == gate::waiter_state::awaiting_groups);
    g.cancel(a);
    g.cancel(b);
}

namespace {

// A request as host_gates runs one: a host gate's waiter, a group queue's node, its ladder.
struct request : gate::waiter, group_gate::waiter {
    std::size_t host = 0;
    group_ladder ladder;
    clock::time_point finishes{};
    bool in_flight = false, done = false;
    gate::waiter& host_node() { return *this; }
    group_gate::waiter& group_node() { return *this; }
};

// Several hosts under shared domain and address groups, run the way host_gates runs them
// (slot, groups in order, token; given back in reverse), with time moved by hand.
struct world {
    clock::time_point now{};
    std::vector<std::unique_ptr<gate>> hosts;
    std::vector<std::shared_ptr<group_gate>> domain_of, ip_of;  // per host
    std::vector<std::shared_ptr<group_gate>> groups;
    std::deque<request> requests;
    std::vector<request*> pending;  // woken: to look at their state

    void wake(const std::vector<gate::waiter*>& w) {
        for (auto* x : w) pending.push_back(static_cast<request*>(x));
    }
    void wake(const std::vector<group_gate::waiter*>& w) {
        for (auto* x : w) pending.push_back(static_cast<request*>(x));
    }
    void advance(std::size_t h) {
        std::vector<gate::waiter*> woken;
        hosts[h]->advance(now, woken);
        wake(woken);
    }
    void give_back_groups(request& r) {
        std::vector<group_gate::waiter*> granted;
        if (r.ladder.engaged(r.group_node())) r.ladder.descend(r.group_node(), granted);
        wake(granted);
    }
    request& arrive(std::size_t h) {
        request& r = requests.emplace_back();
        r.host = h;
        r.ladder.set_levels(domain_of[h], ip_of[h]);
        REQUIRE(hosts[h]->enqueue(r, !r.ladder.empty()) == gate::queued::yes);
        advance(h);
        return r;
    }
    // What a woken request's coroutine does.
    void look(request& r, std::mt19937& random) {
        switch (r.host_node().state()) {
        case gate::waiter_state::awaiting_groups:
            if (r.ladder.climb(r.group_node())) {
                hosts[r.host]->groups_granted(r);
                advance(r.host);
            }
            break;
        case gate::waiter_state::queued:
            give_back_groups(r);  // its host slot was taken back
            break;
        case gate::waiter_state::departed:
            if (!r.in_flight && !r.done) {
                r.in_flight = true;
                r.finishes = now + std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 300)(random));
            }
            break;
        default:
            break;
        }
    }
    void finish(request& r) {
        give_back_groups(r);  // the reverse order: groups, then the host
        hosts[r.host]->release();
        r.in_flight = false;
        r.done = true;
        advance(r.host);
    }
    void leave(request& r) {  // a parked client goes away
        give_back_groups(r);
        hosts[r.host]->cancel(r);
        r.done = true;
        advance(r.host);
    }
    void settle(std::mt19937& random) {
        while (!pending.empty()) {
            request* r = pending.back();
            pending.pop_back();
            look(*r, random);
            check();
        }
    }
    void check() const {
        for (const auto& g : groups) REQUIRE(g->in_flight() <= g->limit());
        for (const auto& r : requests) {
            // A request woken but not yet looking may hold group slots its host took
            // back from it; it gives them back when it looks.
            if (std::find(pending.begin(), pending.end(), &r) != pending.end()) continue;
            const auto hs = const_cast<request&>(r).host_node().state();
            const bool holds_host_slot = hs == gate::waiter_state::awaiting_groups ||
                                         hs == gate::waiter_state::holding_slot || hs == gate::waiter_state::departed;
            // Parked at a group level: it holds exactly the levels before it, and its host slot.
            if (const_cast<request&>(r).group_node().state() == group_gate::waiter_state::queued) {
                REQUIRE(hs == gate::waiter_state::awaiting_groups);
                REQUIRE(r.ladder.held() < r.ladder.levels());
            }
            if (r.ladder.held() > 0 && hs != gate::waiter_state::queued) REQUIRE(holds_host_slot);
            if (hs == gate::waiter_state::holding_slot || (hs == gate::waiter_state::departed && !r.done))
                REQUIRE(r.ladder.complete());
        }
    }
};

}  // namespace

TEST_CASE("groups: two hosts of one domain cannot deadlock (the textbook interleaving)") {
    // a.site and b.site share the domain group (cap 1) and also one address (cap 1).
    world w;
    auto domain = std::make_shared<group_gate>(1);
    auto ip = std::make_shared<group_gate>(1);
    w.groups = {domain, ip};
    for (int h = 0; h < 2; ++h) {
        w.hosts.push_back(std::make_unique<gate>(gate_limits{1, 100.0, 100.0, 100}, w.now));
        w.domain_of.push_back(domain);
        w.ip_of.push_back(ip);
    }
    std::mt19937 random(1);
    request& a1 = w.arrive(0);
    w.settle(random);
    request& b1 = w.arrive(1);
    request& a2 = w.arrive(0);
    w.settle(random);
    CHECK(a1.host_node().state() == gate::waiter_state::departed);
    // b1 holds b.site's slot and waits at the domain, holding nothing after it; a2 waits
    // for a.site's slot, holding nothing at all.
    CHECK(b1.host_node().state() == gate::waiter_state::awaiting_groups);
    CHECK(b1.group_node().state() == group_gate::waiter_state::queued);
    CHECK(b1.ladder.held() == 0);
    CHECK(a2.host_node().state() == gate::waiter_state::queued);
    CHECK(ip->in_flight() == 1);

    w.finish(a1);  // its ip, then domain slot go to b1; a.site's slot to a2, who queues at the domain
    w.settle(random);
    CHECK(b1.host_node().state() == gate::waiter_state::departed);
    CHECK(a2.host_node().state() == gate::waiter_state::awaiting_groups);
    CHECK(a2.group_node().state() == group_gate::waiter_state::queued);
    w.finish(b1);
    w.settle(random);
    CHECK(a2.host_node().state() == gate::waiter_state::departed);
    w.finish(a2);
    CHECK(domain->idle());
    CHECK(ip->idle());
}

TEST_CASE("groups: random arrivals, limits lowered, clients leaving: bounds hold and everyone gets through") {
    for (unsigned seed = 1; seed <= 300; ++seed) {
        CAPTURE(seed);
        std::mt19937 random(seed);
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
        world w;
        // Hosts 0-2 are one registrable domain, 3 another; hosts 0 and 3 share an address.
        auto site = std::make_shared<group_gate>(pick(1, 3));
        auto other = std::make_shared<group_gate>(pick(1, 3));
        auto ip_x = std::make_shared<group_gate>(pick(1, 3));
        auto ip_y = std::make_shared<group_gate>(pick(1, 3));
        w.groups = {site, other, ip_x, ip_y};
        for (int h = 0; h < 4; ++h) {
            w.hosts.push_back(std::make_unique<gate>(
                gate_limits{static_cast<std::size_t>(pick(1, 3)), 20.0, 2.0, 1000}, w.now));
            w.domain_of.push_back(h < 3 ? site : other);
            w.ip_of.push_back(h == 0 || h == 3 ? ip_x : ip_y);
        }
        std::vector<request*> left;
        for (int step = 0; step < 400; ++step) {
            const int what = pick(0, 9);
            if (what < 6 && w.requests.size() < 120) {
                w.arrive(static_cast<std::size_t>(pick(0, 3)));
            } else if (what == 6) {  // a 429 somewhere: the limit falls to 1, slots not yet used come back
                const auto h = static_cast<std::size_t>(pick(0, 3));
                w.hosts[h]->set_limits({1, 20.0, 2.0, 1000}, w.now);
                w.advance(h);
            } else if (what == 7) {
                const auto h = static_cast<std::size_t>(pick(0, 3));
                w.hosts[h]->set_limits({static_cast<std::size_t>(pick(2, 4)), 20.0, 2.0, 1000}, w.now);
                w.advance(h);
            } else if (what == 8 && !w.requests.empty()) {  // a parked client goes away
                request& r = w.requests[static_cast<std::size_t>(pick(0, static_cast<int>(w.requests.size()) - 1))];
                if (!r.done && r.host_node().state() != gate::waiter_state::departed) w.leave(r);
            } else {
                w.now += std::chrono::milliseconds(pick(1, 100));
            }
            w.settle(random);
            for (auto& r : w.requests)
                if (r.in_flight && r.finishes <= w.now) w.finish(r);
            for (std::size_t h = 0; h < w.hosts.size(); ++h) w.advance(h);  // tokens come due
            w.settle(random);
        }
        // No more arrivals: time runs on until everyone is through. A deadlock would
        // leave requests parked with nothing in flight to free them.
        for (int rounds = 0; rounds < 100000; ++rounds) {
            const bool all_done = std::all_of(w.requests.begin(), w.requests.end(), [](const request& r) {
                return r.done;
            });
            if (all_done) break;
            w.now += 10ms;
            for (auto& r : w.requests)
                if (r.in_flight && r.finishes <= w.now) w.finish(r);
            for (std::size_t h = 0; h < w.hosts.size(); ++h) w.advance(h);
            w.settle(random);
        }
        for (const auto& r : w.requests) REQUIRE(r.done);
        for (const auto& g : w.groups) REQUIRE(g->idle());
        for (const auto& h : w.hosts) REQUIRE(h->in_flight() == 0);
    }
}
