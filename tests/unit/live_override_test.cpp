// Admin API overrides: what a PUT body may say (each refusal names its field), the policy
// with an override on top, the stored JSON form and the state file.
#include "politeproxy/policy/live_override.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;
using namespace std::chrono;

namespace {

const wall_clock::time_point now = *parse_timestamp("2026-12-02T12:00:00Z");

host_policy registry() {
    host_policy p;  // concurrency 2, rate 1, burst 1, hard_max 4
    p.burst = 3;
    return p;
}

live_override parsed(const std::string& body, wall_clock::time_point at = now) {
    auto r = parse_override_body(body, "api.example.com", registry(), "alice", at);
    INFO(body);
    if (auto* e = std::get_if<body_error>(&r)) FAIL(e->field << ": " << e->message);
    return std::get<live_override>(r);
}

body_error refused(const std::string& body, wall_clock::time_point at = now) {
    auto r = parse_override_body(body, "api.example.com", registry(), "alice", at);
    INFO(body);
    REQUIRE(std::holds_alternative<body_error>(r));
    return std::get<body_error>(r);
}

}  // namespace

TEST_CASE("timestamps: RFC 3339 in, UTC with milliseconds out") {
    CHECK(format_timestamp(now) == "2026-12-02T12:00:00.000Z");
    CHECK(parse_timestamp("2026-12-02T13:00:00+01:00") == now);
    CHECK(parse_timestamp("2026-12-02T06:30:00-05:30") == now);
    CHECK(parse_timestamp("2026-12-02t12:00:00z") == now);
    CHECK(parse_timestamp("2026-12-02T12:00:00.25Z") == now + 250ms);
    CHECK(format_timestamp(now + 1234567us) == "2026-12-02T12:00:01.234Z");
    CHECK(format_timestamp(wall_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
    for (const char* bad : {"", "2026-12-02", "2026-12-02T12:00:00", "2026-12-02 12:00:00Z", "2026-02-30T12:00:00Z",
                            "2026-12-02T24:00:00Z", "2026-12-02T12:00:00.Z", "2026-12-02T12:00:00+0100",
                            "2026-12-02T12:00:00Zjunk", "1969-12-31T23:59:59Z", "9999-12-02T12:00:00Z"})
        CHECK_MESSAGE(!parse_timestamp(bad), bad);
}

TEST_CASE("a body: concurrency and rate, who set it and when, no expiry") {
    const live_override o = parsed(R"({"concurrency": 1, "rate": 0.5, "reason": "they asked by mail"})");
    CHECK(o.key == "api.example.com");
    CHECK(o.concurrency == 1u);
    CHECK(o.rate == 0.5);
    CHECK(o.reason == "they asked by mail");
    CHECK_FALSE(o.pause_until);
    CHECK_FALSE(o.expires_at);
    CHECK(o.set_by == "alice");
    CHECK(o.set_at == now);
    CHECK(parsed(R"({"rate": 0.5, "concurrency": null, "pause_for": null})").concurrency == std::nullopt);
}

TEST_CASE("a body: every refusal names its field") {
    const std::pair<const char*, const char*> cases[] = {
        {"not json", "body"},
        {"[1]", "body"},
        {"{}", "body"},
        {R"({"reason": "only a reason"})", "body"},
        {R"({"rate": 1, "colour": "red"})", "colour"},
        {R"({"concurrency": 0})", "concurrency"},
        {R"({"concurrency": 1.5})", "concurrency"},
        {R"({"concurrency": 100001})", "concurrency"},
        {R"({"concurrency": "1"})", "concurrency"},
        {R"({"rate": 0.0009})", "rate"},  // slower than one in 1000 s: that is a pause
        {R"({"rate": 0})", "rate"},
        {R"({"rate": -1})", "rate"},
        {R"({"rate": "fast"})", "rate"},
        {R"({"rate": 1e7})", "rate"},
        {R"({"pause_for": "10 minutes"})", "pause_for"},
        {R"({"pause_for": 0})", "pause_for"},
        {R"({"pause_for": "721h"})", "pause_for"},
        {R"({"pause_for": true})", "pause_for"},
        {R"({"pause_until": "tomorrow"})", "pause_until"},
        {R"({"pause_until": "2026-12-02T11:59:59Z"})", "pause_until"},
        {R"({"pause_until": "2027-01-02T12:00:01Z"})", "pause_until"},
        {R"({"pause_for": "1m", "pause_until": "2026-12-03T12:00:00Z"})", "pause_until"},
        {R"({"rate": 0.5, "reason": 7})", "reason"},
        {R"({"rate": 0.5, "reason": "line\nbreak"})", "reason"},
        {R"({"rate": 0.5, "expires_in": "0s"})", "expires_in"},
        {R"({"rate": 0.5, "expires_in": "8761h"})", "expires_in"},
        {R"({"rate": 0.5, "expires_in": -5})", "expires_in"},
    };
    for (const auto& [body, field] : cases) {
        const body_error e = refused(body);
        CHECK_MESSAGE(e.field == field, body << " -> " << e.field << ": " << e.message);
        CHECK_FALSE(e.message.empty());
    }
    CHECK(refused(R"({"rate": 0})").message == "must be a positive number");
    CHECK(refused(R"({"rate": 0.5, "reason": ")" + std::string(501, 'x') + "\"}").field == "reason");
    CHECK(parsed(R"({"rate": 0.5, "reason": ")" + std::string(500, 'x') + "\"}").reason.size() == 500);
}

TEST_CASE("a body: pause_for as a config duration or seconds; a pause alone expires with it") {
    CHECK(parsed(R"({"pause_for": "10m"})").pause_until == now + 10min);
    CHECK(parsed(R"({"pause_for": "500ms"})").pause_until == now + 500ms);
    CHECK(parsed(R"({"pause_for": 90})").pause_until == now + 90s);
    CHECK(parsed(R"({"pause_for": 1.5})").pause_until == now + 1500ms);
    CHECK(parsed(R"({"pause_for": "720h"})").pause_until == now + 720h);

    const live_override alone = parsed(R"({"pause_for": "1h"})");
    CHECK(alone.expires_at == now + 1h);
    const live_override with_rate = parsed(R"({"pause_for": "1h", "rate": 0.5})");
    CHECK_FALSE(with_rate.expires_at);
    CHECK(parsed(R"({"pause_for": "1h", "expires_in": "2h"})").expires_at == now + 2h);
}

TEST_CASE("a body: pause_until as RFC 3339 (offsets, fractions) or Unix seconds, within 30 days") {
    CHECK(parsed(R"({"pause_until": "2026-12-05T12:00:00Z"})").pause_until == now + 72h);
    CHECK(parsed(R"({"pause_until": "2026-12-05T13:00:00.5+01:00"})").pause_until == now + 72h + 500ms);
    const auto unix_s = duration_cast<seconds>(now.time_since_epoch()).count();
    CHECK(parsed("{\"pause_until\": " + std::to_string(unix_s + 60) + "}").pause_until == now + 60s);
    CHECK(refused("{\"pause_until\": " + std::to_string(unix_s) + "}").message == "must be in the future");
    CHECK(refused(R"({"pause_until": 1e300})").field == "pause_until");
    const live_override o = parsed(R"({"pause_until": "2027-01-01T12:00:00Z"})");
    CHECK(o.expires_at == o.pause_until);
}

TEST_CASE("a body: expires_in sets the expiry; expired() from that instant on") {
    const live_override o = parsed(R"({"rate": 0.5, "expires_in": "1h"})");
    REQUIRE(o.expires_at == now + 1h);
    CHECK_FALSE(o.expired(now + 1h - 1ms));
    CHECK(o.expired(now + 1h));
    CHECK(parsed(R"({"rate": 0.5, "expires_in": 30})").expires_at == now + 30s);
    CHECK(parsed(R"({"rate": 0.5, "expires_in": "8760h"})").expires_at == now + 8760h);
    CHECK_FALSE(parsed(R"({"rate": 0.5})").expired(now + 8760h * 10));
}

TEST_CASE("a body: raising above the registry needs a reason, lowering none") {
    CHECK(refused(R"({"concurrency": 3})").field == "reason");
    CHECK(refused(R"({"concurrency": 3})").message.find("raising concurrency above 2") == 0);
    CHECK(refused(R"({"concurrency": 3, "reason": "  "})").field == "reason");
    CHECK(refused(R"({"rate": 2})").message.find("raising rate above 1") == 0);
    CHECK(parsed(R"({"concurrency": 3, "reason": "their API page says 5"})").concurrency == 3u);
    CHECK(parsed(R"({"concurrency": 2, "rate": 1})").rate == 1.0);  // equal is no raise
    CHECK(parsed(R"({"concurrency": 1, "rate": 0.1})").reason.empty());
}

TEST_CASE("with_override: concurrency is a hard cap; rate replaces, the burst never grows") {
    live_override o;
    o.concurrency = 1;
    host_policy p = with_override(registry(), o);
    CHECK(p.concurrency == 1);
    CHECK(p.adaptive.hard_max == 1);
    CHECK(p.rate == registry().rate);
    CHECK(p.burst == registry().burst);

    o = {};
    o.rate = 0.2;
    p = with_override(registry(), o);
    CHECK(p.rate == 0.2);
    CHECK(p.burst == 1.0);  // at least one token, never a three-request burst at 0.2/s
    CHECK(p.concurrency == registry().concurrency);
    CHECK(p.adaptive.hard_max == registry().adaptive.hard_max);

    o.rate = 2;
    CHECK(with_override(registry(), o).burst == 2.0);
    o.rate = 50;
    CHECK(with_override(registry(), o).burst == 3.0);  // the registry's

    o = {};
    o.pause_until = now + 1h;
    CHECK(with_override(registry(), o).concurrency == registry().concurrency);
}

TEST_CASE("to_json and override_from_json: every field, null for absent ones") {
    live_override full = parsed(R"({"concurrency": 1, "rate": 0.5, "pause_for": "10m", "reason": "asked \"nicely\"",
                                    "expires_in": "1h"})");
    CHECK(to_json(full) ==
          R"({"key":"api.example.com","concurrency":1,"rate":5E-1,"pause_until":"2026-12-02T12:10:00.000Z",)"
          R"("reason":"asked \"nicely\"","expires_at":"2026-12-02T13:00:00.000Z","set_by":"alice",)"
          R"("set_at":"2026-12-02T12:00:00.000Z"})");
    CHECK(override_from_json(to_json(full)) == full);

    const live_override minimal = parsed(R"({"rate": 1})");
    CHECK(to_json(minimal).find(R"("concurrency":null,"rate":1,"pause_until":null)") != std::string::npos);
    CHECK(override_from_json(to_json(minimal)) == minimal);

    for (const char* bad : {"", "{", "[]", R"({"key":"a","rate":1,"set_by":"x"})",
                            R"({"key":"","rate":1,"set_by":"x","set_at":"2026-12-02T12:00:00.000Z"})",
                            R"({"key":"a","rate":"1","set_by":"x","set_at":"2026-12-02T12:00:00.000Z"})",
                            R"({"key":"a","rate":1,"set_by":"x","set_at":"2026-12-02T12:00:00.000Z","extra":1})",
                            R"({"key":"a","set_by":"x","set_at":"2026-12-02T12:00:00.000Z"})",
                            R"({"key":"a","rate":1,"set_by":"x","set_at":"2026-12-02T12:00:00.000Z","expires_at":5})"})
        CHECK_MESSAGE(!override_from_json(bad), bad);
}

TEST_CASE("the state file: a round trip, a later entry for a key wins") {
    const std::vector<live_override> none;
    CHECK(std::get<std::vector<live_override>>(parse_state_file(state_file_text(none))).empty());

    std::vector<live_override> all{parsed(R"({"rate": 0.5})"), parsed(R"({"pause_for": "1h"})")};
    all[1].key = "other.example";
    const auto back = parse_state_file(state_file_text(all));
    REQUIRE(std::holds_alternative<std::vector<live_override>>(back));
    CHECK(std::get<std::vector<live_override>>(back) == all);

    std::vector<live_override> twice{all[0], all[1], all[0]};
    twice[2].rate = 0.25;
    const auto merged = std::get<std::vector<live_override>>(parse_state_file(state_file_text(twice)));
    REQUIRE(merged.size() == 2);
    CHECK(merged[0].rate == 0.25);
    CHECK(merged[1].key == "other.example");
}

TEST_CASE("the state file: a file cut anywhere mid-write is refused, saying so") {
    std::vector<live_override> all{parsed(R"({"concurrency": 1, "rate": 0.5, "reason": "r", "expires_in": "1h"})"),
                                   parsed(R"({"pause_for": "1h"})")};
    all[1].key = "other.example";
    const std::string text = state_file_text(all);
    const std::size_t closing = text.rfind('}');
    for (std::size_t cut = 0; cut <= closing; ++cut) {
        const auto r = parse_state_file(text.substr(0, cut));
        REQUIRE_MESSAGE(std::holds_alternative<std::string>(r), "cut at " << cut);
        CHECK(std::get<std::string>(r).find("not JSON at byte") == 0);
    }
}

TEST_CASE("the state file: wrong types and bad entries are refused with where") {
    auto error_of = [](const std::string& text) {
        const auto r = parse_state_file(text);
        INFO(text);
        REQUIRE(std::holds_alternative<std::string>(r));
        return std::get<std::string>(r);
    };
    const std::string good = R"({"key":"a","rate":1,"set_by":"x","set_at":"2026-12-02T12:00:00.000Z"})";
    CHECK(error_of("[]") == "the state file must be a JSON object");
    CHECK(error_of(R"({"version": 2, "overrides": []})") == "version must be 1");
    CHECK(error_of(R"({"version": "1", "overrides": []})") == "version must be 1");
    CHECK(error_of(R"({"version": 1, "overrides": {}})") == "overrides must be an array");
    CHECK(error_of(R"({"version": 1})") == "overrides must be an array");
    CHECK(error_of(R"({"version": 1, "overrides": [], "more": 1})").find("unknown field 'more'") == 0);
    const std::string bad_rate = R"({"key":"b","rate":"fast","set_by":"x","set_at":"2026-12-02T12:00:00.000Z"})";
    CHECK(error_of(R"({"version": 1, "overrides": [)" + good + "," + bad_rate + "]}") ==
          "overrides[1]: rate must be a positive number");
    CHECK(error_of(R"({"version": 1, "overrides": [)" + good + ", 7]}") == "overrides[1]: must be a JSON object");
    CHECK(error_of(R"({"version": 1, "overrides": [{"key":"a","rate":1,"set_by":"x","set_at":"yesterday"}]})") ==
          "overrides[0]: set_at must be an RFC 3339 timestamp");
}

TEST_CASE("a rate of many digits is kept as its own JSON text reads it back") {
    const auto o = parsed(R"({"rate": 0.0013013949680000000000000000000000000000123456789})");
    REQUIRE(o.rate);
    const auto again = override_from_json(to_json(o));
    REQUIRE(again);
    CHECK(*again == o);
}

TEST_CASE("times finer than a millisecond are kept as the JSON form keeps them") {
    // From the store (the fuzzer's find): 40 µs past the second.
    const auto stored = override_from_json(
        R"({"key":"a.test","concurrency":null,"rate":5,"pause_until":"2026-12-05T10:00:00.000040000000000000000Z",)"
        R"("reason":"r","expires_at":"2026-12-05T11:00:00.000Z","set_by":"bob","set_at":"2026-12-05T10:00:00.0009Z"})");
    REQUIRE(stored);
    CHECK(stored->pause_until == parse_timestamp("2026-12-05T10:00:00Z"));
    CHECK(stored->set_at == *parse_timestamp("2026-12-05T10:00:00Z"));
    CHECK(override_from_json(to_json(*stored)) == stored);

    // From a PUT body, with a clock and numbers finer than a millisecond.
    const auto put = parsed(R"({"pause_until": 1796212860.0004567, "expires_in": 0.0015, "rate": 1})", now + 123456ns);
    CHECK(put.set_at == now);
    CHECK(put.pause_until == now + 60s);
    CHECK(put.expires_at == now + 1ms);
    CHECK(override_from_json(to_json(put)) == put);

    // Less than a millisecond ahead is no time at all: refused, not kept as already over.
    CHECK(refused(R"({"pause_for": 0.0004})", now + 123456ns).message == "must be at least 1ms");
    CHECK(refused(R"({"pause_until": 1796212800.0009})", now + 123456ns).message == "must be in the future");
    CHECK(refused(R"({"rate": 1, "expires_in": 0.0005})", now + 123456ns).field == "expires_in");
}
