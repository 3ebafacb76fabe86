#include "politeproxy/policy/token_bucket.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono_literals;

TEST_CASE("a bucket starts full and refills at its rate") {
    const clock::time_point t0{};
    token_bucket b(5.0, 2.0, t0);
    CHECK(b.full(t0));
    CHECK(b.try_take(t0));
    CHECK(b.try_take(t0));
    CHECK_FALSE(b.try_take(t0));
    CHECK(b.wait_for_token(t0) >= 200ms);
    CHECK(b.wait_for_token(t0) < 201ms);
    CHECK_FALSE(b.try_take(t0 + 199ms));
    CHECK(b.try_take(t0 + 200ms + 1us));
    CHECK_FALSE(b.full(t0 + 300ms));
    CHECK(b.full(t0 + 600ms));
}

TEST_CASE("waking at the announced time always finds the token") {
    const clock::time_point t0{};
    token_bucket b(3.0, 1.0, t0);  // 1/3 s does not divide nanoseconds evenly
    auto now = t0;
    REQUIRE(b.try_take(now));
    for (int i = 0; i < 100; ++i) {
        now += b.wait_for_token(now);
        REQUIRE(b.try_take(now));
    }
    // 100 tokens at 3/s take 33.3 s, and no more than a microsecond of rounding.
    CHECK(now - t0 >= 33333ms);
    CHECK(now - t0 < 33334ms);
}

TEST_CASE("the bucket never holds more than burst") {
    const clock::time_point t0{};
    token_bucket b(100.0, 3.0, t0);
    const auto later = t0 + 1h;
    int taken = 0;
    while (b.try_take(later)) ++taken;
    CHECK(taken == 3);
}

TEST_CASE("reconfigure keeps earned tokens, capped by the new burst") {
    const clock::time_point t0{};
    token_bucket b(1.0, 10.0, t0);
    b.reconfigure(1.0, 2.0, t0);
    CHECK(b.try_take(t0));
    CHECK(b.try_take(t0));
    CHECK_FALSE(b.try_take(t0));
    b.reconfigure(10.0, 2.0, t0);
    CHECK(b.try_take(t0 + 100ms));
    CHECK(b.rate() == 10.0);
}

TEST_CASE("time going backwards does not mint tokens") {
    const clock::time_point t0 = clock::time_point{} + 10s;
    token_bucket b(1.0, 1.0, t0);
    REQUIRE(b.try_take(t0));
    CHECK_FALSE(b.try_take(t0 - 5s));
    CHECK_FALSE(b.try_take(t0 + 500ms));
    CHECK(b.try_take(t0 + 1s));
}
