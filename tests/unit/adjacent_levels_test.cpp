#include "politeproxy/policy/adjacent_levels.hpp"

#include <doctest/doctest.h>

#include <random>

using namespace politeproxy;
using namespace std::chrono_literals;
using verdict = adjacent_levels::verdict;

namespace {

// Feeds `n` responses at `level`, exponential with `mean` (or all `mean` when constant).
void feed(adjacent_levels& l, std::size_t level, int n, clock::duration mean, std::mt19937_64* random = nullptr) {
    std::exponential_distribution<double> d(1.0 / std::chrono::duration<double>(mean).count());
    for (int i = 0; i < n; ++i) {
        const auto x = random ? std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(d(*random))) : mean;
        l.add(level, x);
    }
}

// A pair reached by a jump to `lower`, `lower_n` responses there, then a growth step and
// `upper_n` responses at lower + 1.
adjacent_levels step_up(std::size_t lower, int lower_n, clock::duration at_lower, int upper_n, clock::duration at_upper) {
    adjacent_levels l;
    l.moved(lower + 4, lower);
    feed(l, lower, lower_n, at_lower);
    l.moved(lower, lower + 1);
    feed(l, lower + 1, upper_n, at_upper);
    return l;
}

}  // namespace

TEST_CASE("a growth step that adds no queue is clear, one that adds one queued request is not") {
    adjacent_levels l;
    l.moved(8, 4);  // a jump: 4 is the lower level, 5 the one to try
    CHECK(l.lower() == 4);
    feed(l, 4, 40, 100ms);
    CHECK(l.judge(2, 256) == verdict::open);  // nothing at 5 yet
    l.moved(4, 5);
    feed(l, 5, 20, 100ms);  // the same latency: nothing of ours waits
    CHECK(l.judge(2, 256) == verdict::clear);

    // 5 / 4 of it: one request waits behind C = 4.
    CHECK(step_up(4, 40, 100ms, 20, 125ms).judge(2, 256) == verdict::queues);
}

TEST_CASE("at a high limit a constant service time still tells one queued request apart") {
    // The baseline test's 20% floor would not see 8 / 7.
    CHECK(step_up(7, 40, 100ms, 20, 100ms * 8 / 7).judge(2, 256) == verdict::queues);
}

TEST_CASE("a noisy origin is on trial until the responses can tell; then the side of the midpoint decides") {
    std::mt19937_64 random(7);
    int queues = 0, clear = 0;
    for (int run = 0; run < 40; ++run) {
        adjacent_levels l;
        l.moved(8, 4);
        feed(l, 4, 400, 100ms, &random);
        l.moved(4, 5);
        feed(l, 5, 16, 100ms, &random);
        // Exponential service, 16 responses at 5: far from enough to tell 1 from 5/4.
        const verdict early = l.judge(2, 256);
        CHECK(early != verdict::queues);
        feed(l, 5, 240, 100ms, &random);  // no queue at 5 (C >= 5): mostly clear
        const verdict v = l.judge(2, 256);
        CHECK(v != verdict::open);  // decided by 256 responses at the latest
        (v == verdict::clear ? clear : queues)++;
    }
    MESSAGE("clear " << clear << " of 40");
    CHECK(clear >= 34);
}

TEST_CASE("a level found clear is then held to the full test: a later queue still shows") {
    auto l = step_up(3, 40, 100ms, 20, 100ms);
    CHECK(l.judge(2, 256) == verdict::clear);
    feed(l, 4, 200, 140ms);  // capacity fell to 3 while at 4
    CHECK(l.judge(2, 256) == verdict::queues);
}

TEST_CASE("a level held clear long enough is left to the baseline test") {
    auto l = step_up(3, 40, 100ms, 20, 100ms);
    CHECK(l.judge(2, 64) == verdict::clear);
    feed(l, 4, 4 * 64, 100ms);
    feed(l, 4, 100, 140ms);  // the origin drifted; its old responses at 3 cannot tell why
    CHECK(l.judge(2, 64) == verdict::clear);
}

TEST_CASE("the pair follows growth one step at a time and starts again on any other change") {
    auto l = step_up(3, 20, 100ms, 20, 100ms);
    CHECK(l.judge(2, 256) == verdict::clear);
    l.moved(4, 5);  // up from the upper level: 4 is now the lower one, with its responses
    CHECK(l.lower() == 4);
    CHECK(l.upper_count() == 0);
    feed(l, 5, 20, 125ms);
    CHECK(l.judge(2, 256) == verdict::queues);
    l.moved(5, 4);  // back down within the pair: 4's responses hold
    CHECK(l.lower() == 4);
    l.moved(4, 5);  // a new trial of 5, against them
    CHECK(l.upper_count() == 0);
    feed(l, 5, 16, 100ms);
    CHECK(l.judge(2, 256) == verdict::clear);
    l.moved(5, 4);
    l.moved(4, 3);  // down from the lower level: a new pair, nothing to compare with
    CHECK(l.lower() == 3);
    CHECK(l.upper_count() == 0);
    l.moved(3, 1);  // a collapse
    CHECK(l.lower() == 1);
    feed(l, 5, 20, 100ms);  // not a level of the pair's: ignored
    CHECK(l.upper_count() == 0);
}
