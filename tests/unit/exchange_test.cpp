// The protocol-neutral exchange: what each step of a request's trip tells the host's
// gate (outcome, health, pause) and when the slot goes back. Real host_gates and
// metrics, no sockets and no waiting: every step is a call.
#include "politeproxy/exchange/exchange.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <doctest/doctest.h>

#include <optional>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

// A response's fields, as the transports hand them to response_arrived.
struct fields {
    std::vector<std::pair<std::string_view, std::string_view>> named;
    std::string_view operator()(std::string_view name) const {
        for (const auto& [n, v] : named)
            if (n == name) return v;
        return {};
    }
};
const fields no_fields;

struct fixture {
    explicit fixture(std::string_view extra = "") : cfg([&] {
        auto c = load_config_text("defaults: { concurrency: 4, rate: 100000, burst: 100000 }\n" + std::string(extra),
                                  "test.yaml");
        REQUIRE(c.has_value());
        return std::make_shared<const config>(std::move(*c));
    }()) {}
    std::shared_ptr<const config> cfg;
    host_gates gates{cfg};
    politeproxy::metrics metrics;
    logger log{log_level::error};
    std::string key = "origin.test";

    exchange start() {
        permit slot = gates.try_acquire(key);
        REQUIRE(slot);
        exchange trip(metrics, log, std::move(slot), key);
        trip.request_sent();
        return trip;
    }
    host_snapshot host() const { return gates.snapshot(clock::now()).at(0); }
    std::uint64_t count(outcome o) const { return host().outcomes[static_cast<std::size_t>(o)]; }
};

}  // namespace

TEST_CASE("an ordinary response: outcome ok, the slot held until the origin is done") {
    fixture f;
    {
        exchange trip = f.start();
        CHECK(f.host().in_flight == 1);
        trip.response_arrived(200, no_fields, "GET", false);
        CHECK(f.host().in_flight == 1);  // the body is still coming
        trip.origin_done();
        CHECK(f.host().in_flight == 0);
    }
    CHECK(f.count(outcome::ok) == 1);
    CHECK(f.host().limit == 4);
}

TEST_CASE("a 429 with Retry-After pauses the host at once and counts as throttled") {
    fixture f;
    {
        exchange trip = f.start();
        trip.response_arrived(429, fields{{{"retry-after", "30"}}}, "GET", true);
        const auto h = f.host();
        CHECK(h.paused_for > 25s);
        CHECK(h.paused_for <= 30s);
        CHECK(h.limit == 1);
    }
    CHECK(f.count(outcome::throttled) == 1);
    CHECK(f.host().in_flight == 0);
}

TEST_CASE("throttle signals: the statuses and header patterns configured, per host") {
    const char* yaml = "hosts:\n"
                       "  cdn.test:\n"
                       "    throttle:\n"
                       "      statuses: [403, 429, 503]\n"
                       "      headers: {cf-mitigated: \"^challenge$\"}\n";
    SUBCASE("a 403 is an answer by default") {
        fixture f;
        f.start().response_arrived(403, no_fields, "GET", false);
        CHECK(f.count(outcome::ok) == 1);
        CHECK(f.host().limit == 4);
    }
    SUBCASE("a 403 throttles where statuses name it") {
        fixture f(yaml);
        f.key = "cdn.test";
        f.start().response_arrived(403, no_fields, "GET", false);
        CHECK(f.count(outcome::throttled) == 1);
        CHECK(f.host().limit == 1);
        CHECK(f.host().paused_for > 0s);
    }
    SUBCASE("a 503 is an answer where statuses leave it out") {
        fixture f("hosts: {origin.test: {throttle: {statuses: [429]}}}\n");
        f.start().response_arrived(503, no_fields, "GET", false);
        CHECK(f.count(outcome::ok) == 1);
    }
    SUBCASE("a 200 with a matching header throttles; another value does not") {
        fixture f(yaml);
        f.key = "cdn.test";
        f.start().response_arrived(200, fields{{{"cf-mitigated", "challenge"}}}, "GET", false);
        CHECK(f.count(outcome::throttled) == 1);
        fixture g(yaml);
        g.key = "cdn.test";
        g.start().response_arrived(200, fields{{{"cf-mitigated", "challenged"}}}, "GET", false);
        CHECK(g.count(outcome::ok) == 1);
    }
    SUBCASE("another host keeps the defaults") {
        fixture f(yaml);
        f.start().response_arrived(200, fields{{{"cf-mitigated", "challenge"}}}, "GET", false);
        CHECK(f.count(outcome::ok) == 1);
    }
}

TEST_CASE("a refused connection collapses the host's limit; a client that broke off does not") {
    fixture f;
    f.start().client_failed();
    CHECK(f.count(outcome::error) == 1);
    CHECK(f.host().limit == 4);

    f.start().connect_failed(errc::origin_refused);
    CHECK(f.count(outcome::refused) == 1);
    CHECK(f.host().limit == 1);
}

TEST_CASE("failures before a response count by their kind") {
    fixture f;
    f.start().connect_failed(errc::origin_connect_timeout);
    f.start().response_failed(errc::origin_response_timeout);
    CHECK(f.count(outcome::timeout) == 2);
    f.start().response_failed(errc::origin_bad_response);
    CHECK(f.count(outcome::error) == 1);
    CHECK(f.host().limit == 4);
    // A refusal collapses the host (and pauses it): one per fixture.
    f.start().request_refused();
    CHECK(f.count(outcome::refused) == 1);
    CHECK(f.host().limit == 1);
    fixture g;
    g.start().response_failed(errc::origin_closed);
    CHECK(g.count(outcome::refused) == 1);
    CHECK(g.host().limit == 1);
    CHECK(f.host().in_flight + g.host().in_flight == 0);
}

TEST_CASE("a body cut short: timeout or error") {
    fixture f;
    {
        exchange trip = f.start();
        trip.response_arrived(200, no_fields, "GET", false);
        trip.body_failed(true);
    }
    {
        exchange trip = f.start();
        trip.response_arrived(200, no_fields, "GET", false);
        trip.body_failed(false);
    }
    CHECK(f.count(outcome::timeout) == 1);
    CHECK(f.count(outcome::error) == 1);
}

TEST_CASE("Proxy-Status names the time the request waited at its gate") {
    fixture f;
    std::string status;
    f.start().append_proxy_status(status);
    CHECK(status == "politeproxy; queue-wait=0.000");
    status.clear();
    append_queue_wait_status(1234567us, status);
    CHECK(status == "politeproxy; queue-wait=1.235");
}
