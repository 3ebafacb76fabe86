#include "politeproxy/policy/adaptive_limit.hpp"
#include "politeproxy/policy/latency_baseline.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <vector>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

host_policy policy(std::size_t concurrency = 4, std::size_t hard_max = 6) {
    host_policy p;
    p.concurrency = concurrency;
    p.rate = 10;
    p.adaptive.hard_max = hard_max;
    p.adaptive.grow_interval = 30s;
    p.backoff.initial = 5s;
    p.backoff.max = 40s;
    p.backoff.forgive_after = 10min;
    p.backoff.jitter = 0;
    return p;
}

const adaptive_limit::random_source half = [] { return 0.5; };

health_signal response(clock::duration latency, std::uint64_t epoch) {
    return {health_signal::kind::response, latency, std::nullopt, epoch};
}
health_signal throttled(std::uint64_t epoch, std::optional<clock::duration> retry_after = std::nullopt) {
    return {health_signal::kind::throttled, 10ms, retry_after, epoch};
}

// Feeds `n` responses of `latency`, each departing at the current epoch.
void feed(adaptive_limit& a, clock::time_point& now, int n, clock::duration latency) {
    for (int i = 0; i < n; ++i) {
        now += 100ms;
        a.on_signal(response(latency, a.epoch()), now, half);
    }
}

}  // namespace

TEST_CASE("no decision before the minimum number of samples") {
    const auto p = policy();
    clock::time_point now{};
    adaptive_limit a(p, now);
    feed(a, now, 5, 10s);  // a host's first responses are all slow: nothing to hold them against
    feed(a, now, adaptive_limit::min_samples - 6, 100ms);
    CHECK(a.limit() == 4);
    CHECK(a.last_reason() == change_reason::none);
}

TEST_CASE("responses slower than 1.5x p95 shrink by one, once per congestion event") {
    const auto p = policy();
    clock::time_point now{};
    adaptive_limit a(p, now);
    feed(a, now, 60, 100ms);
    const auto departed_epoch = a.epoch();  // these requests were in flight together
    // One slow response is not a jump (a heavy tail has one every hundred); the median of
    // the last five being slow is.
    for (int i = 0; i < 4; ++i) a.on_signal(response(100ms, departed_epoch), now, half);
    CHECK(a.on_signal(response(1s, departed_epoch), now, half) == limit_change::none);
    CHECK(a.on_signal(response(1s, departed_epoch), now, half) == limit_change::none);
    CHECK(a.on_signal(response(1s, departed_epoch), now, half) == limit_change::down);
    CHECK(a.limit() == 3);
    CHECK(a.last_reason() == change_reason::slow_response);
    // The others were already in flight when the limit fell: no further cut.
    for (int i = 0; i < 5; ++i) CHECK(a.on_signal(response(1s, departed_epoch), now, half) == limit_change::none);
    CHECK(a.limit() == 3);
    // Requests sent after the cut that are still that slow are a new event.
    feed(a, now, 2, 100ms);
    feed(a, now, 2, 5s);
    CHECK(a.limit() == 3);
    feed(a, now, 1, 5s);
    CHECK(a.limit() == 2);
}

TEST_CASE("a standing queue the p95 window cannot see shrinks the limit to what the origin serves") {
    // An origin that can serve 2 at 100 ms, sent 8: its queue builds step by step, each
    // step (k+1)/k slower, never 1.5x the p95 of the responses just before.
    const auto p = policy(8, 8);
    clock::time_point now{};
    adaptive_limit a(p, now);
    feed(a, now, 200, 100ms);  // the no-load baseline: 100 ms
    REQUIRE(a.baseline());
    CHECK(std::chrono::duration<double>(*a.baseline()).count() == doctest::Approx(0.1));
    double latency = 0.1;
    while (a.limit() == 8 && latency < 0.4) {
        latency *= 1.1;
        feed(a, now, 8, std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(latency)));
    }
    CHECK(a.last_reason() == change_reason::standing_queue);
    CHECK(latency < 0.2);  // seen while still under 2x the baseline
    CHECK(a.limit() >= 4);  // never more than half at once
    // From now on the origin's queue follows the limit: L requests at 2 workers.
    for (int i = 0; i < 10 && a.limit() > 2; ++i) {
        const std::size_t before = a.limit();
        feed(a, now, 16, std::max<std::size_t>(a.limit(), 2) * 50ms);
        CHECK(a.limit() >= before / 2);
    }
    CHECK(a.limit() == 2);
    // No queue at 2: it stays, and probes again only after a grow_interval.
    feed(a, now, 250, 100ms);
    CHECK(a.limit() == 2);
    feed(a, now, 100, 100ms);
    CHECK(a.limit() == 3);
}

TEST_CASE("below the configured limit it grows back one step per grow_interval while there is no queue") {
    const auto p = policy(4, 4);
    clock::time_point now{};
    adaptive_limit a(p, now);
    feed(a, now, 200, 100ms);
    a.on_signal(throttled(a.epoch()), now, half);
    REQUIRE(a.limit() == 1);
    now = a.paused_until();
    std::size_t previous = a.limit();
    for (int step = 0; step < 8; ++step) {
        for (int i = 0; i < 290; ++i) {
            now += 100ms;  // 29 s of healthy responses: less than a grow_interval
            a.on_signal(response(100ms, a.epoch()), now, half);
        }
        CHECK(a.limit() <= previous + 1);
        previous = a.limit();
    }
    CHECK(a.limit() == 4);
    CHECK(a.last_reason() == change_reason::healthy);
}

TEST_CASE("a growth step that finds a queue makes the next one wait longer") {
    auto p = policy(4, 4);
    p.adaptive.grow_interval = 1s;
    clock::time_point now{};
    adaptive_limit a(p, now);
    feed(a, now, 200, 100ms);
    a.on_signal(throttled(a.epoch()), now, half);
    now = a.paused_until();
    const auto step_up = [&] {  // healthy responses until the limit rises; returns the time it took
        const auto from = now;
        const auto limit = a.limit();
        while (a.limit() == limit) feed(a, now, 1, 100ms);
        return now - from;
    };
    CHECK(step_up() <= 2s);  // 1 -> 2: 16 responses (at 1 nothing of ours can queue)
    CHECK(step_up() <= 4s);  // 2 -> 3: 32 responses
    feed(a, now, 16, 300ms);  // 3 shows a queue: back to 2
    REQUIRE(a.limit() == 2);
    CHECK(a.last_reason() == change_reason::standing_queue);
    CHECK(step_up() >= 6s);  // the next probe waits two intervals and must hold for 64 responses
    feed(a, now, 16, 300ms);
    REQUIRE(a.limit() == 2);
    CHECK(step_up() >= 6s);  // then four intervals
    CHECK(step_up() <= 4s);  // the last step held: back to the pace
}

TEST_CASE("above the configured limit only a host that became faster grows, never above hard_max") {
    const auto p = policy(2, 3);
    clock::time_point now{};
    adaptive_limit a(p, now);
    for (int i = 0; i < 400; ++i) {
        now += 1s;
        a.on_signal(response(100ms, a.epoch()), now, half);
    }
    CHECK(a.limit() == 2);  // steady: stays at configured
    for (int i = 0; i < 400; ++i) {
        now += 1s;
        a.on_signal(response(40ms, a.epoch()), now, half);
    }
    CHECK(a.limit() == 3);  // faster than 0.6 x p95: one step, and hard_max stops it
}

TEST_CASE("a steady host does not grow above its configured limit") {
    const auto p = policy(2, 4);
    clock::time_point now{};
    adaptive_limit a(p, now);
    for (int i = 0; i < 200; ++i) {
        now += 1s;
        a.on_signal(response(100ms, a.epoch()), now, half);
    }
    CHECK(a.limit() == 2);
}

TEST_CASE("with adaptive disabled only incidents act") {
    auto p = policy(2, 4);
    p.adaptive.enabled = false;
    clock::time_point now{};
    adaptive_limit a(p, now);
    feed(a, now, 200, 100ms);
    feed(a, now, 20, 10s);
    CHECK(a.limit() == 2);
    CHECK(a.on_signal(throttled(a.epoch()), now, half) == limit_change::collapse);
    CHECK(a.limit() == 1);
}

TEST_CASE("a 429 collapses the limit, halves the rate and pauses for the longer of Retry-After and backoff") {
    const auto p = policy();
    clock::time_point now{};
    adaptive_limit a(p, now);
    CHECK(a.on_signal(throttled(a.epoch(), 30s), now, half) == limit_change::collapse);
    CHECK(a.limit() == 1);
    CHECK(a.rate() == 5.0);
    CHECK(a.paused_until() == now + 30s);  // Retry-After 30 s beats backoff 5 s

    adaptive_limit b(p, now);
    b.on_signal(throttled(b.epoch(), 2s), now, half);
    CHECK(b.paused_until() == now + 5s);  // backoff 5 s beats Retry-After 2 s
}

TEST_CASE("backoff doubles per consecutive incident up to max, and is forgiven after a quiet period") {
    const auto p = policy();
    clock::time_point now{};
    adaptive_limit a(p, now);
    const clock::duration expected[] = {5s, 10s, 20s, 40s, 40s};
    for (auto d : expected) {
        a.on_signal(throttled(a.epoch()), now, half);
        CHECK(a.paused_until() - now == d);
        now = a.paused_until();
    }
    now += 10min;  // forgive_after without an incident
    a.on_signal(throttled(a.epoch()), now, half);
    CHECK(a.paused_until() - now == clock::duration(5s));
}

TEST_CASE("responses already in flight at the collapse are the same incident") {
    const auto p = policy();
    clock::time_point now{};
    adaptive_limit a(p, now);
    const auto epoch = a.epoch();
    a.on_signal(throttled(epoch), now, half);
    const auto first_pause = a.paused_until();
    CHECK(a.on_signal(throttled(epoch), now + 1s, half) == limit_change::none);
    CHECK(a.paused_until() == first_pause);  // not doubled
    CHECK(a.rate() == 5.0);                  // not halved again
    // Its Retry-After may still extend the pause.
    a.on_signal(throttled(epoch, 60s), now + 1s, half);
    CHECK(a.paused_until() == now + 61s);
}

TEST_CASE("jitter spreads the pause within +-jitter") {
    auto p = policy();
    p.backoff.jitter = 0.1;
    clock::time_point now{};
    adaptive_limit low(p, now), high(p, now);
    low.on_signal(throttled(0), now, [] { return 0.0; });
    high.on_signal(throttled(0), now, [] { return 0.999999; });
    CHECK(low.paused_until() - now == clock::duration(4500ms));
    CHECK(high.paused_until() - now > 5490ms);
    CHECK(high.paused_until() - now <= 5500ms);
}

TEST_CASE("the rate recovers gradually after the pause") {
    const auto p = policy();
    clock::time_point now{};
    adaptive_limit a(p, now);
    a.on_signal(throttled(a.epoch()), now, half);
    a.on_signal(throttled(a.epoch()), a.paused_until(), half);
    CHECK(a.rate() == 2.5);
    now = a.paused_until();
    CHECK_FALSE(a.tick(now + 1s));          // not before a grow_interval has passed
    CHECK(a.tick(now + 30s));
    CHECK(a.rate() == 5.0);
    CHECK_FALSE(a.tick(now + 31s));
    CHECK(a.tick(now + 60s));
    CHECK(a.rate() == 10.0);                // back to configured, never above
    CHECK_FALSE(a.tick(now + 1h));
}

TEST_CASE("a reload keeps a collapse, and moves a healthy host to the new values") {
    const auto old_policy = policy(4, 6);
    auto new_policy = policy(3, 6);
    clock::time_point now{};
    adaptive_limit collapsed(old_policy, now), healthy(old_policy, now);
    collapsed.on_signal(throttled(collapsed.epoch()), now, half);
    collapsed.reconfigure(new_policy, now + 1s);
    healthy.reconfigure(new_policy, now + 1s);
    CHECK(collapsed.limit() == 1);
    CHECK(collapsed.rate() == 5.0);
    CHECK(collapsed.paused_until() == now + 5s);
    CHECK(healthy.limit() == 3);
    CHECK(healthy.rate() == 10.0);
    CHECK(collapsed.last_reason() == change_reason::throttled);  // the reload moved nothing
    CHECK(healthy.last_reason() == change_reason::reload);
}

TEST_CASE("without latency adaptation a collapsed limit steps back after the pause") {
    auto p = policy(3, 6);
    p.adaptive.enabled = false;
    clock::time_point now{};
    adaptive_limit a(p, now);
    a.on_signal(throttled(a.epoch()), now, half);
    REQUIRE(a.limit() == 1);
    const auto end = a.paused_until();
    CHECK_FALSE(a.tick(end - 1s));
    CHECK(a.tick(end + 30s));
    CHECK(a.limit() == 2);
    CHECK(a.tick(end + 60s));
    CHECK(a.limit() == 3);
    CHECK_FALSE(a.tick(end + 1h));
    CHECK(a.limit() == 3);
}

TEST_CASE("p95 is the exact 95th percentile of the last 64 responses") {
    // The cached p95 must equal a fresh nth_element over the window after every sample,
    // including runs of equal values and samples that land exactly on p95.
    auto p = policy();
    p.adaptive.enabled = false;  // only the window matters here
    auto now = clock::time_point{} + 1h;
    adaptive_limit a(p, now);
    std::minstd_rand random(7);
    std::deque<std::uint32_t> last;
    for (int i = 0; i < 2000; ++i) {
        const std::uint32_t us = i % 300 < 150 ? 1000 + random() % 8 : 500 + random() % 5000;
        a.on_signal(response(std::chrono::microseconds(us), a.epoch()), now, half);
        last.push_back(us);
        if (last.size() > adaptive_limit::window_size) last.pop_front();
        std::vector<std::uint32_t> sorted(last.begin(), last.end());
        std::sort(sorted.begin(), sorted.end());
        const auto k = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(sorted.size()))) - 1;
        REQUIRE(a.p95() == std::chrono::microseconds(sorted[k]));
    }
}

TEST_CASE("the baseline: a standing queue barely moves it, a host slower for good gets a new one") {
    latency_baseline b;
    for (int i = 0; i < 200; ++i) b.add(100ms);
    REQUIRE(b.seconds());
    CHECK(*b.seconds() == doctest::Approx(0.1));
    for (std::uint32_t i = 0; i < 5 * latency_baseline::block_size; ++i) b.add(400ms);
    CHECK(*b.seconds() < 0.125);  // five blocks of a queue: under 25% higher
    for (std::uint32_t i = 0; i < 200 * latency_baseline::block_size; ++i) b.add(400ms);
    CHECK(*b.seconds() > 0.39);  // 200 blocks later the new latency is the baseline
    for (std::uint32_t i = 0; i < 20 * latency_baseline::block_size; ++i) b.add(100ms);
    CHECK(*b.seconds() < 0.11);  // faster again: followed within some blocks
}
