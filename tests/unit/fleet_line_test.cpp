// One host's line for fleet leases (policy/fleet_line): who asks, when the head asks
// again, whom to wake, when to withdraw, and the store's counts. Time moves by hand.
#include "politeproxy/policy/fleet_line.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

const clock::time_point t0 = clock::time_point(1h);

fleet_line::answer refused(std::size_t held, clock::duration token_in = {}, clock::duration paused_for = {}) {
    return {false, held, token_in, paused_for};
}

}  // namespace

TEST_CASE("only the head asks; when it leaves, the next one asks at once; the last one out without a lease withdraws") {
    fleet_line line;
    gate::waiter a, b, c;
    line.join(a);
    line.join(b);
    line.join(c);
    CHECK(line.is_head(a));
    CHECK_FALSE(line.is_head(b));
    CHECK(line.size() == 3);

    const auto mid = line.leave(b, false);  // not the head: nobody to wake, nothing to withdraw
    CHECK(mid.wake == nullptr);
    CHECK_FALSE(mid.withdraw);

    const auto first = line.leave(a, true);
    CHECK(first.wake == &c);
    CHECK_FALSE(first.withdraw);
    CHECK(line.is_head(c));

    const auto last = line.leave(c, false);  // gave up: its place in the store's queue goes too
    CHECK(last.wake == nullptr);
    CHECK(last.withdraw);
    CHECK(line.empty());

    line.join(a);
    CHECK_FALSE(line.leave(a, true).withdraw);  // leased: the store's queue already let it go
    CHECK_FALSE(line.leave(a, true).withdraw);  // not in the line: nothing happens
}

TEST_CASE("a refused head asks again after 5 ms doubling to 50 ms, sooner when the store names a token's time") {
    fleet_line line;
    gate::waiter a, b;
    line.join(a);
    line.join(b);
    auto now = t0;
    for (const auto expected : {5ms, 10ms, 20ms, 40ms, 50ms, 50ms}) {
        const auto next = line.head_refused(refused(2), now);
        CHECK(next - now == expected);
        now = next;
    }
    CHECK(line.head_refused(refused(2, 3ms), now) - now == 3ms);  // the fleet's token is due then
    CHECK(line.head_refused(refused(2, 10s), now) - now == fleet_line::place_keepalive);  // or the store forgets us
    CHECK(line.head_refused(refused(2, {}, 2s), now) - now == 2s);  // a pause: wait it out, no keepalive
    // A new head starts afresh.
    line.leave(a, false);
    CHECK(line.head_refused(refused(2), now) - now == 5ms);
}

TEST_CASE("the store's count: others are what it holds beyond this process's leases, as last heard") {
    fleet_line line;
    CHECK_FALSE(line.held());
    gate::waiter a;
    line.join(a);
    line.heard({true, 3, {}, {}}, t0);  // granted: ours is one of the 3
    CHECK(line.leased() == 1);
    CHECK(*line.held() == 3);
    CHECK(line.others() == 2);
    CHECK(line.heard_at() == t0);

    line.leased_unasked();  // taken while the store was away
    line.heard_held(2, t0 + 1s);
    CHECK(line.others() == 0);  // never below zero
    CHECK(line.heard_at() == t0 + 1s);

    line.returned();
    CHECK(line.leased() == 1);
    CHECK(*line.held() == 1);  // the count as last heard, less what went back
    line.returned();
    line.returned();
    CHECK(line.leased() == 0);
    CHECK(*line.held() == 0);
}

TEST_CASE("an answer heard outside the line (an ask made at once) counts, but moves no head's backoff") {
    fleet_line line;
    gate::waiter a;
    for (int i = 0; i < 4; ++i) line.heard(refused(2), t0);  // four requests refused at once, before parking
    CHECK(line.others() == 2);
    line.join(a);
    CHECK(line.head_refused(refused(2), t0) - t0 == 5ms);  // the head's first wait is still the first step
}
