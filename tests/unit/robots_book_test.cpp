#include "politeproxy/policy/robots_book.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

using kind = robots_verdict::kind;
const robots_book::backoff retry{5s, 40s};

robots_read read_of(std::string_view text, std::optional<double> delay = std::nullopt) {
    return {robots_read::kind::rules, std::make_shared<const robots_rules>(robots_rules::parse(text)), delay};
}
robots_read delay_of(double seconds) { return read_of("", seconds); }
const robots_read none{robots_read::kind::no_restrictions, nullptr, std::nullopt};

// What the book says of `path` for `agent`: "allowed", "disallowed", "unreachable", "unknown".
std::string says(const robots_book& book, const std::string& origin, std::string_view path, std::string_view agent,
                 clock::time_point now) {
    const robots_verdict v = book.verdict(origin, now);
    switch (v.what) {
    case kind::read: return v.rules->allowed(path, agent) ? "allowed" : "disallowed";
    case kind::unreachable: return "unreachable";
    case kind::unknown: break;
    }
    return "unknown";
}
const robots_read unreachable{robots_read::kind::unreachable, nullptr, std::nullopt};

}  // namespace

TEST_CASE("robots book: the first request fetches, the rest go on; fetched again after cache_ttl") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    CHECK(book.on_request("http://a.test:80", t));
    CHECK_FALSE(book.on_request("http://a.test:80", t + 1s));  // a fetch is under way
    CHECK_FALSE(book.rate_cap("a.test", t));
    book.fetched("http://a.test:80", "a.test", delay_of(4.0), retry, t + 1s);
    CHECK(book.rate_cap("a.test", t + 2s) == 0.25);
    CHECK_FALSE(book.on_request("http://a.test:80", t + 23h));
    CHECK(book.on_request("http://a.test:80", t + 24h + 1s));
    CHECK(book.rate_cap("a.test", t + 24h) == 0.25);  // until the new read reports
    book.fetched("http://a.test:80", "a.test", none, retry, t + 24h + 2s);
    CHECK_FALSE(book.rate_cap("a.test", t + 24h + 3s));  // no longer asked: the configured rate again
}

TEST_CASE("robots book: verdicts from the rules read, for each client's agent") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    const std::string origin = "http://r.test:80";
    CHECK(says(book, origin, "/", "bot", t) == "unknown");
    REQUIRE(book.on_request(origin, t));
    CHECK(says(book, origin, "/", "bot", t) == "unknown");  // being read: wait
    book.fetched(origin, "r.test", read_of("User-agent: *\nDisallow: /private\n\nUser-agent: goodbot\nAllow: /\n"),
                 retry, t);
    CHECK(says(book, origin, "/public", "bot", t) == "allowed");
    CHECK(says(book, origin, "/private/x", "bot", t) == "disallowed");
    CHECK(says(book, origin, "/private/x", "GoodBot/2.0", t) == "allowed");
    // A 4xx: no restrictions.
    REQUIRE(book.on_request("http://n.test:80", t));
    book.fetched("http://n.test:80", "n.test", none, retry, t);
    CHECK(says(book, "http://n.test:80", "/anything", "bot", t) == "allowed");
}

TEST_CASE("robots book: unreachable disallows all until a later fetch reads it, backing off") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    const std::string origin = "http://down.test:80";
    REQUIRE(book.on_request(origin, t));
    book.fetched(origin, "down.test", unreachable, retry, t);
    auto v = book.verdict(origin, t + 1s);
    CHECK(v.what == kind::unreachable);
    CHECK(v.retry_after == 4s);
    CHECK_FALSE(book.on_request(origin, t + 4s));
    REQUIRE(book.on_request(origin, t + 5s));  // backoff.initial
    CHECK(says(book, origin, "/", "bot", t + 5s) == "unknown");  // being read again: wait
    book.fetched(origin, "down.test", unreachable, retry, t + 5s);
    CHECK_FALSE(book.on_request(origin, t + 5s + 9s));
    REQUIRE(book.on_request(origin, t + 5s + 10s));  // doubled
    book.fetched(origin, "down.test", unreachable, retry, t + 15s);
    book.on_request(origin, t + 35s);
    book.fetched(origin, "down.test", unreachable, retry, t + 35s);
    book.on_request(origin, t + 75s);
    book.fetched(origin, "down.test", unreachable, retry, t + 75s);
    CHECK(book.verdict(origin, t + 75s).retry_after == 40s);  // backoff.max
    REQUIRE(book.on_request(origin, t + 115s));
    book.fetched(origin, "down.test", read_of("User-agent: *\nDisallow: /x\n"), retry, t + 116s);
    CHECK(says(book, origin, "/", "bot", t + 116s) == "allowed");
    CHECK(says(book, origin, "/x", "bot", t + 116s) == "disallowed");
    // Fine again: a later failure starts from backoff.initial.
    REQUIRE(book.on_request(origin, t + 116s + 24h));
    book.fetched(origin, "down.test", unreachable, retry, t + 116s + 24h);
    CHECK_FALSE(book.on_request(origin, t + 116s + 24h + 4s));
}

TEST_CASE("robots book: a copy read earlier serves while a refetch fails, up to cache_ttl past its due time") {
    robots_book book(1h, 30s);
    clock::time_point t{};
    const std::string origin = "http://flaky.test:80";
    REQUIRE(book.on_request(origin, t));
    book.fetched(origin, "flaky.test", read_of("User-agent: *\nDisallow: /x\n"), retry, t);
    REQUIRE(book.on_request(origin, t + 1h));
    CHECK(says(book, origin, "/x", "bot", t + 1h) == "disallowed");  // the copy, while it is read again
    book.fetched(origin, "flaky.test", unreachable, retry, t + 1h);
    CHECK(says(book, origin, "/", "bot", t + 1h + 10min) == "allowed");
    CHECK(says(book, origin, "/x", "bot", t + 1h + 10min) == "disallowed");
    REQUIRE(book.on_request(origin, t + 2h));
    book.fetched(origin, "flaky.test", unreachable, retry, t + 2h);
    CHECK(says(book, origin, "/", "bot", t + 2h) == "unreachable");  // the copy is too old now
}

TEST_CASE("robots book: delays are capped by max_delay; a lost fetch does not block the origin") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    CHECK(book.on_request("https://slow.test:443", t));
    book.fetched("https://slow.test:443", "slow.test", delay_of(3600.0), retry, t);
    CHECK(book.rate_cap("slow.test", t) == doctest::Approx(1.0 / 30));

    CHECK(book.on_request("http://lost.test:80", t));
    CHECK_FALSE(book.on_request("http://lost.test:80", t + robots_book::fetch_timeout - 1s));
    CHECK(book.on_request("http://lost.test:80", t + robots_book::fetch_timeout));
}

TEST_CASE("robots book: several origins of one gate: the strictest applies, its own origin may relax it") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    book.on_request("http://site.test:80", t);
    book.fetched("http://site.test:80", "site.test", delay_of(2.0), retry, t);
    book.on_request("https://site.test:443", t);
    book.fetched("https://site.test:443", "site.test", delay_of(10.0), retry, t);
    CHECK(book.rate_cap("site.test", t) == 0.1);
    book.fetched("http://site.test:80", "site.test", delay_of(1.0), retry, t + 1s);  // looser, another origin: no change
    CHECK(book.rate_cap("site.test", t + 1s) == 0.1);
    book.fetched("https://site.test:443", "site.test", delay_of(5.0), retry, t + 2s);  // its own origin relaxes it
    CHECK(book.rate_cap("site.test", t + 2s) == 0.2);
}

TEST_CASE("robots book: memory stays bounded, in origins and in the bytes of their rules") {
    robots_book book(24h, 30s);
    clock::time_point t{};
    for (std::size_t i = 0; i < robots_book::max_origins * 3; ++i) {
        const std::string origin = "http://h" + std::to_string(i) + ".test:80";
        REQUIRE(book.on_request(origin, t));
        book.fetched(origin, origin, delay_of(1.0), retry, t);
        t += 1ms;
    }
    CHECK(book.origins() <= robots_book::max_origins);
    // The newest are kept.
    CHECK(book.rate_cap("http://h" + std::to_string(robots_book::max_origins * 3 - 1) + ".test:80", t) == 1.0);

    // Big files: the rules kept stay under max_rule_bytes.
    robots_book big(24h, 30s);
    std::string file = "User-agent: *\n";
    while (file.size() < robots_txt_max_bytes - 64) file += "Disallow: /some/long/path/" + std::to_string(file.size()) + "\n";
    const robots_read read = read_of(file);
    REQUIRE(read.rules->bytes() > 100 * 1024);
    const std::size_t needed = robots_book::max_rule_bytes / read.rules->bytes() * 2;
    for (std::size_t i = 0; i < needed; ++i) {
        const std::string origin = "http://big" + std::to_string(i) + ".test:80";
        REQUIRE(big.on_request(origin, t));
        big.fetched(origin, origin, read, retry, t);
        t += 1ms;
        CHECK(big.rule_bytes() <= robots_book::max_rule_bytes);
    }
    CHECK(big.origins() < needed);
}
