#include "politeproxy/policy/retry_after.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono;
using namespace std::chrono_literals;

namespace {
// Sun, 06 Nov 1994 08:49:37 GMT minus 10 s.
const system_clock::time_point wall_now = sys_days{1994y / November / 6} + 8h + 49min + 27s;
const clock::duration cap = 1h;
}  // namespace

TEST_CASE("delay-seconds") {
    CHECK(parse_retry_after("120", wall_now, cap) == clock::duration(120s));
    CHECK(parse_retry_after(" 0 ", wall_now, cap) == clock::duration(0s));
}

TEST_CASE("HTTP-date in all three forms, relative to now") {
    CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", wall_now, cap) == clock::duration(10s));
    CHECK(parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", wall_now, cap) == clock::duration(10s));
    CHECK(parse_retry_after("Sun Nov  6 08:49:37 1994", wall_now, cap) == clock::duration(10s));
}

TEST_CASE("a date in the past means no wait") {
    CHECK(parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", wall_now, cap) == clock::duration::zero());
}

TEST_CASE("huge values are capped") {
    CHECK(parse_retry_after("86400", wall_now, cap) == cap);
    CHECK(parse_retry_after("99999999999999999999999999", wall_now, cap) == cap);
    // found by retry_after_fuzz: a date this far ahead overflowed the nanosecond clock
    CHECK(parse_retry_after("Sun, 06 Nov 9994 08:49:37 GMT", wall_now, cap) == cap);
    CHECK(parse_retry_after("Fri, 31 Dec 2100 23:59:59 GMT", wall_now, cap) == cap);
}

TEST_CASE("garbage is not a wait") {
    for (auto bad : {"", "soon", "-5", "1.5", "12abc", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 32 Nov 1994 08:49:37 GMT",
                     "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT"})
        CHECK_MESSAGE(!parse_retry_after(bad, wall_now, cap), bad);
}
