// The adaptive controller against a simulated origin (C workers, a FIFO queue, a 503
// wall at 2 x C waiting) on simulated time: the behaviour issue 11 asks for, checked on
// what the origin saw.
#include "simulated_origin.hpp"

#include <doctest/doctest.h>


using namespace politeproxy;
using namespace politeproxy::test;
using namespace std::chrono_literals;
using shape = simulated_origin::service_shape;

namespace {

host_policy polite_eight() {
    host_policy p;
    p.concurrency = 8;
    p.rate = 1000;
    p.adaptive.hard_max = 8;
    p.adaptive.grow_interval = 1s;
    p.backoff.initial = 1s;
    p.backoff.max = 60s;
    p.backoff.forgive_after = 60s;
    p.backoff.jitter = 0;
    return p;
}

void print(const char* name, const std::vector<phase_report>& rs) {
    for (const auto& r : rs)
        MESSAGE(name << " C=" << r.workers << " goodput " << r.goodput << " queue " << r.mean_waiting << " within "
                     << r.share_within_one << " 503s " << r.rejected << " reached "
                     << (r.reached_within_one ? *r.reached_within_one : -1.0));
}

}  // namespace

TEST_CASE("a capacity drop against a 503 wall: within 1 of C within 3 s, then no 503 and a small queue") {
    const auto p = polite_eight();
    for (const auto s : {shape::constant, shape::exponential}) {
        for (std::uint64_t seed = 1; seed <= 5; ++seed) {
            CAPTURE(static_cast<int>(s));
            CAPTURE(seed);
            simulated_origin origin(p, s, 100ms, seed);
            // The drop, then its steady state (from 5 s on) as a phase of its own.
            const auto rs = origin.run({{8, 40s}, {2, 5s}, {2, 35s}});
            print(s == shape::constant ? "constant" : "exponential", rs);
            CHECK(rs[0].goodput >= 0.9);  // a healthy host is left alone
            REQUIRE(rs[1].reached_within_one);
            CHECK(*rs[1].reached_within_one <= 3.0);
            CHECK(rs[1].rejected <= 5);  // the wall at the drop itself: nothing could see it coming
            CHECK(rs[2].rejected == 0);
            CHECK(rs[2].share_within_one >= 0.8);
            CHECK(rs[2].goodput >= 0.85);
            // One queued request while a growth step probes: rare with a constant
            // service time, which shows it in one response.
            if (s == shape::constant) CHECK(rs[2].mean_waiting <= 0.3);
        }
    }
}

TEST_CASE("a capacity drop with no wall: the standing queue alone brings the limit within 1 of C") {
    // Latency rises step by step as the queue builds, (k+1)/k < 1.5 per step: the 1.5 x p95
    // rule alone would let it stand.
    const auto p = polite_eight();
    for (const auto s : {shape::constant, shape::exponential}) {
        CAPTURE(static_cast<int>(s));
        simulated_origin origin(p, s, 100ms, 3, 1e9);
        const auto rs = origin.run({{8, 40s}, {2, 40s}});
        print("no wall", rs);
        REQUIRE(rs[1].reached_within_one);
        CHECK(*rs[1].reached_within_one <= 3.0);
        CHECK(rs[1].rejected == 0);
        CHECK(rs[1].share_within_one >= 0.8);
    }
}

TEST_CASE("when capacity returns the host earns back its configured level") {
    // Every growth step is on trial against the level below (adjacent_levels); with an
    // exponential service time a trial takes tens of responses and a wrong verdict now
    // and then costs a few seconds, so goodput is checked over five seeds.
    const auto p = polite_eight();
    for (const auto s : {shape::constant, shape::exponential}) {
        CAPTURE(static_cast<int>(s));
        double goodput = 0;
        for (std::uint64_t seed = 1; seed <= 5; ++seed) {
            CAPTURE(seed);
            simulated_origin origin(p, s, 100ms, seed);
            std::size_t highest_late = 0;
            const auto rise = clock::time_point{} + 1h + 80s;
            const auto rs = origin.run({{8, 40s}, {2, 40s}, {8, 40s}}, [&](clock::time_point t, const adaptive_limit& a) {
                if (t >= rise + 20s) highest_late = std::max(highest_late, a.limit());
            });
            print("return", rs);
            CHECK(highest_late == 8);
            CHECK(rs[2].goodput >= 0.7);
            goodput += rs[2].goodput / 5;
        }
        CHECK(goodput >= 0.8);
    }
}

TEST_CASE("small queues: capacity that steps down and up gradually, and C = 4 with exponential service") {
    // Issue 31: one request queued at the origin adds 1 / C to the latency there, under
    // the baseline test's 20% floor from C = 5 on; each growth step is on trial against
    // the level below (adjacent_levels) and a shrink goes to what Little's law serves.
    const auto p = polite_eight();
    const std::vector<capacity_phase> gradual{{8, 20s}, {6, 20s}, {4, 20s}, {2, 20s}, {4, 20s}, {8, 20s}};
    std::vector<double> queue(gradual.size()), goodput(gradual.size());
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        simulated_origin origin(p, shape::constant, 100ms, seed);
        const auto rs = origin.run(gradual);
        print("gradual", rs);
        for (std::size_t i = 0; i < rs.size(); ++i) {
            queue[i] += rs[i].mean_waiting / 5;
            goodput[i] += rs[i].goodput / 5;
        }
    }
    for (std::size_t i = 0; i < gradual.size(); ++i) {
        CAPTURE(i);
        CHECK(queue[i] <= 0.3);
        CHECK(goodput[i] >= 0.85);  // not by holding back: C is served
    }

    // The goal, 0.5, with the mean of 10 seeds (0.49 when written: one more
    // queued request in a seed's 40 s moves it by 0.03).
    double at_four = 0, served_at_four = 0;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        simulated_origin origin(p, shape::exponential, 100ms, seed);
        const auto rs = origin.run({{8, 40s}, {4, 40s}, {8, 40s}});
        print("exponential 8-4-8", rs);
        at_four += rs[1].mean_waiting / 10;
        served_at_four += rs[1].goodput / 10;
        CHECK(rs[1].rejected == 0);
    }
    CHECK(at_four <= 0.5);
    CHECK(served_at_four >= 0.85);
}

TEST_CASE("an origin with steady latency never sees more than the configured level") {
    auto p = polite_eight();
    p.concurrency = 2;
    p.adaptive.hard_max = 4;  // growth above configured is allowed, but only for a faster host
    for (const auto s : {shape::constant, shape::exponential}) {
        CAPTURE(static_cast<int>(s));
        simulated_origin origin(p, s, 100ms, 4);
        std::size_t highest = 0;
        origin.run({{8, 120s}}, [&](clock::time_point, const adaptive_limit& a) { highest = std::max(highest, a.limit()); });
        CHECK(highest == 2);
    }
}

TEST_CASE("backoff.forgive_after's default: a host that keeps throttling escalates, one incident per capacity change does not") {
    host_policy p;  // the defaults, but for the host's level
    p.concurrency = 8;
    p.rate = 1000;
    p.backoff.jitter = 0;
    const auto pauses = [&](simulated_origin& origin, const std::vector<capacity_phase>& schedule) {
        std::vector<double> seen;
        auto until = origin.controller().paused_until();
        origin.run(schedule, [&](clock::time_point t, const adaptive_limit& a) {
            if (a.paused_until() == until) return;
            until = a.paused_until();
            seen.push_back(std::chrono::duration<double>(until - t).count());
        });
        return seen;
    };
    // Throttling: a 503 whenever both workers are busy. With the default grow_interval
    // (30 s) the host is probed again about a minute after each incident.
    simulated_origin throttling(p, shape::constant, 100ms, 1, 0.0);
    const auto escalating = pauses(throttling, {{2, 600s}});
    REQUIRE(escalating.size() >= 4);
    MESSAGE("throttling host, pauses: " << escalating[0] << " " << escalating[1] << " " << escalating[2] << " "
                                         << escalating[3]);
    CHECK(escalating[1] >= 2 * escalating[0]);
    CHECK(escalating[3] >= 8 * escalating[0]);
    // Capacity that falls every 6 minutes (the limit earns back 8 in between at 30 s a
    // step): each drop is one incident, and each is the first.
    simulated_origin changing(p, shape::constant, 100ms, 1);
    const auto separate = pauses(changing, {{8, 300s}, {2, 60s}, {8, 300s}, {2, 60s}, {8, 300s}, {2, 60s}});
    REQUIRE(separate.size() >= 3);
    for (const double pause : separate) CHECK(pause == doctest::Approx(5.0));
}
