// When a parent proxy is worth trying: fail_after, retry_after doubling and jittered,
// a trial after its down time, forgiveness after a quiet spell. Time is moved by hand.
#include "politeproxy/policy/parent_health.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

const clock::time_point t0 = clock::time_point{} + 1000s;

// The down time of the incident `failed` started at `at`.
clock::duration down_time(const parent_health& h, clock::time_point at) { return h.down_until() - at; }

}  // namespace

TEST_CASE("fail_after consecutive failures mark it down for retry_after, jittered by at most 10%") {
    parent_health h(3, 10s, 42);
    CHECK(h.up(t0));
    CHECK_FALSE(h.failed(t0));
    CHECK_FALSE(h.failed(t0 + 1s));
    CHECK(h.usable(t0 + 1s));
    CHECK(h.failed(t0 + 2s));
    CHECK_FALSE(h.usable(t0 + 2s));
    CHECK_FALSE(h.up(t0 + 2s));
    CHECK(down_time(h, t0 + 2s) >= 9s);
    CHECK(down_time(h, t0 + 2s) <= 11s);
}

TEST_CASE("an answer between failures resets the count") {
    parent_health h(2, 10s);
    CHECK_FALSE(h.failed(t0));
    h.answered(t0 + 1s);
    CHECK_FALSE(h.failed(t0 + 2s));
    CHECK(h.usable(t0 + 2s));
    CHECK(h.failed(t0 + 3s));
}

TEST_CASE("after its down time it is tried: one answer and it is up, one failure and it is down again, for twice as long") {
    parent_health h(3, 10s, 7);
    for (int i = 0; i < 3; ++i) h.failed(t0);
    const auto back = h.down_until();
    CHECK(h.usable(back));
    CHECK_FALSE(h.up(back));  // on trial
    CHECK(h.failed(back));    // one failure on trial is enough
    const auto second = down_time(h, back);
    CHECK(second >= 18s);
    CHECK(second <= 22s);
    const auto back2 = h.down_until();
    h.answered(back2 + 1s);
    CHECK(h.up(back2 + 1s));
    CHECK_FALSE(h.failed(back2 + 2s));  // up again: fail_after counts anew
}

TEST_CASE("failures of requests that started before it went down do not extend its down time") {
    parent_health h(1, 10s);
    CHECK(h.failed(t0));
    const auto until = h.down_until();
    CHECK_FALSE(h.failed(t0 + 1s));
    CHECK(h.down_until() == until);
}

TEST_CASE("doubling stops at 64 times retry_after; a quiet spell of 4 x retry_after forgives it") {
    parent_health h(1, 1s, 3);
    clock::time_point now = t0;
    clock::duration last{};
    for (int i = 0; i < 10; ++i) {
        CHECK(h.failed(now));
        last = down_time(h, now);
        now = h.down_until();
    }
    CHECK(last >= 57s);  // 64 s, jittered
    CHECK(last <= 71s);
    h.answered(now);
    CHECK(h.up(now));
    const auto later = now + 5s;  // no failure for more than 4 x 1 s
    CHECK(h.failed(later));
    CHECK(down_time(h, later) <= 1100ms);
}
