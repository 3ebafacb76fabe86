#include "politeproxy/policy/robots_book.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;
using namespace std::chrono_literals;

TEST_CASE("robots book: the first request fetches, the rest go on; fetched again after cache_ttl") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    CHECK(book.on_request("http://a.test:80", t));
    CHECK_FALSE(book.on_request("http://a.test:80", t + 1s));  // a fetch is under way
    CHECK_FALSE(book.rate_cap("a.test", t));
    book.fetched("http://a.test:80", "a.test", 4.0, false, t + 1s);
    CHECK(book.rate_cap("a.test", t + 2s) == 0.25);
    CHECK_FALSE(book.on_request("http://a.test:80", t + 23h));
    CHECK(book.on_request("http://a.test:80", t + 24h + 1s));
    CHECK(book.rate_cap("a.test", t + 24h) == 0.25);  // until the new read reports
    book.fetched("http://a.test:80", "a.test", std::nullopt, false, t + 24h + 2s);
    CHECK_FALSE(book.rate_cap("a.test", t + 24h + 3s));  // no longer asked: the configured rate again
}

TEST_CASE("robots book: delays are capped by max_delay; failures fall back and retry sooner") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    CHECK(book.on_request("https://slow.test:443", t));
    book.fetched("https://slow.test:443", "slow.test", 3600.0, false, t);
    CHECK(book.rate_cap("slow.test", t) == doctest::Approx(1.0 / 30));

    CHECK(book.on_request("http://down.test:80", t));
    book.fetched("http://down.test:80", "down.test", std::nullopt, true, t);
    CHECK_FALSE(book.rate_cap("down.test", t));
    CHECK_FALSE(book.on_request("http://down.test:80", t + robots_book::retry_after_failure - 1s));
    CHECK(book.on_request("http://down.test:80", t + robots_book::retry_after_failure));

    // A fetch that never reports back does not block the origin forever.
    CHECK(book.on_request("http://lost.test:80", t));
    CHECK_FALSE(book.on_request("http://lost.test:80", t + robots_book::fetch_timeout - 1s));
    CHECK(book.on_request("http://lost.test:80", t + robots_book::fetch_timeout));
}

TEST_CASE("robots book: several origins of one gate: the strictest applies, its own origin may relax it") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    book.on_request("http://site.test:80", t);
    book.fetched("http://site.test:80", "site.test", 2.0, false, t);
    book.on_request("https://site.test:443", t);
    book.fetched("https://site.test:443", "site.test", 10.0, false, t);
    CHECK(book.rate_cap("site.test", t) == 0.1);
    book.fetched("http://site.test:80", "site.test", 1.0, false, t + 1s);  // looser, another origin: no change
    CHECK(book.rate_cap("site.test", t + 1s) == 0.1);
    book.fetched("https://site.test:443", "site.test", 5.0, false, t + 2s);  // its own origin relaxes it
    CHECK(book.rate_cap("site.test", t + 2s) == 0.2);
}

TEST_CASE("robots book: memory stays bounded") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    for (std::size_t i = 0; i < robots_book::max_origins * 3; ++i) {
        const std::string origin = "http://h" + std::to_string(i) + ".test:80";
        REQUIRE(book.on_request(origin, t));
        book.fetched(origin, origin, 1.0, false, t);
        t += 1ms;
    }
    CHECK(book.origins() <= robots_book::max_origins);
    // The newest are kept.
    CHECK(book.rate_cap("http://h" + std::to_string(robots_book::max_origins * 3 - 1) + ".test:80", t) == 1.0);
}
