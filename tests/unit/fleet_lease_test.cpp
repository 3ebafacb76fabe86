// The lease protocol's sans-io half: renewal schedule, re-assertion, the local share.
#include "politeproxy/policy/fleet_lease.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace politeproxy;
using namespace std::chrono_literals;

TEST_CASE("the local share never presents more than the limit across expected_workers processes") {
    CHECK(fleet_share::limit(2, 2) == 1);
    CHECK(fleet_share::limit(3, 2) == 1);  // rounding down: 2 processes x 1 <= 3
    CHECK(fleet_share::limit(8, 3) == 2);
    CHECK(fleet_share::limit(1, 6) == 1);  // at least one each: the floor is documented
    CHECK(fleet_share::limit(4, 0) == 4);  // expected_workers 0 is rejected at load; treated as 1
    CHECK(fleet_share::rate(6.0, 6) == doctest::Approx(1.0));
    CHECK(fleet_share::rate(1.0, 4) == doctest::Approx(0.25));
}

TEST_CASE("during the hold after the store went away, a process takes only what the others left") {
    // limit 2, two processes: the other held both slots at the store's last answer.
    CHECK(fleet_share::limit_during_hold(2, 2, 2) == 0);
    CHECK(fleet_share::limit_during_hold(2, 2, 1) == 1);
    CHECK(fleet_share::limit_during_hold(2, 2, 0) == 1);  // never more than the share
    CHECK(fleet_share::limit_during_hold(8, 2, 3) == 4);
    CHECK(fleet_share::limit_during_hold(8, 2, 6) == 2);
    CHECK(fleet_share::limit_during_hold(2, 2, 5) == 0);  // more than the limit: nothing
}

TEST_CASE("a lease is renewed once a third of its TTL has passed, and not before") {
    lease_book book(0xabc);
    const auto t0 = clock::time_point{} + 1h;
    const auto ttl = 30s;
    const auto a = book.next_id();
    const auto b = book.next_id();
    CHECK(a != b);
    book.add(a, "one.example", t0);
    book.add(b, "one.example", t0 + 5s);
    CHECK(book.due(t0 + 9s, ttl / 3).empty());
    auto first = book.due(t0 + 10s, ttl / 3);
    REQUIRE(first.size() == 1);
    CHECK(first[0].first == "one.example");
    CHECK(first[0].second == std::vector<lease_book::id>{a});
    // Renewed at t0 + 10 s: due again at t0 + 20 s; b (taken at t0 + 5 s) at t0 + 15 s.
    auto second = book.due(t0 + 15s, ttl / 3);
    REQUIRE(second.size() == 1);
    CHECK(second[0].second == std::vector<lease_book::id>{b});
    CHECK(book.due(t0 + 19s, ttl / 3).empty());
}

TEST_CASE("a released lease is never renewed; take_all hands over every lease by key") {
    lease_book book(1);
    const auto t0 = clock::time_point{} + 1h;
    const auto a = book.next_id(), b = book.next_id(), c = book.next_id();
    book.add(a, "x.example", t0);
    book.add(b, "y.example", t0);
    book.add(c, "x.example", t0);
    CHECK(book.remove(b));
    CHECK_FALSE(book.remove(b));
    CHECK(book.size() == 2);
    auto all = book.take_all(t0 + 1s);
    REQUIRE(all.size() == 1);
    CHECK(all[0].first == "x.example");
    auto ids = all[0].second;
    std::sort(ids.begin(), ids.end());
    CHECK(ids == std::vector<lease_book::id>{a, c});
    CHECK(book.due(t0 + 5s, 10s).empty());  // take_all counted as a renewal
}

TEST_CASE("lease members carry the process tag, so two processes never share one") {
    lease_book p(0x1), q(0x2);
    CHECK(p.member(1) != q.member(1));
    CHECK(p.member(7) == "0000000000000001:7");
}

TEST_CASE("the leases of a busy host are renewed in bounded batches (a command's arguments are bounded)") {
    lease_book book(7);
    const clock::time_point t0{std::chrono::hours(1)};
    for (int i = 0; i < 100; ++i) book.add(book.next_id(), "busy.test", t0);
    const auto batches = book.take_all(t0);
    REQUIRE(batches.size() == 3);
    std::size_t total = 0;
    for (const auto& [key, ids] : batches) {
        CHECK(key == "busy.test");
        CHECK(ids.size() <= lease_book::most_per_batch);
        total += ids.size();
    }
    CHECK(total == 100);
}
