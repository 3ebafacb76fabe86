#include "politeproxy/policy/live_override.hpp"

#include "override_fields.hpp"
#include "politeproxy/base/duration.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace politeproxy {
namespace override_detail {

std::optional<double> number_of(const boost::json::value& v) {
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    if (v.is_double()) return v.get_double();
    return std::nullopt;
}

std::optional<std::string> check_concurrency(const boost::json::value& v, std::size_t& out) {
    const auto n = number_of(v);
    if (!n || *n != std::floor(*n) || *n < 1 || *n > override_limits::max_concurrency)
        return "must be a whole number from 1 to " + std::to_string(override_limits::max_concurrency);
    out = static_cast<std::size_t>(*n);
    return std::nullopt;
}

std::optional<std::string> check_rate(const boost::json::value& v, double& out) {
    const auto n = number_of(v);
    if (!n || !std::isfinite(*n) || *n <= 0) return "must be a positive number";
    if (*n > override_limits::max_rate) return "must be at most 1000000";
    if (*n < override_limits::min_rate) return "must be at least 0.001 (one request in 1000 s; to stop a host: pause_for)";
    // The value kept is one its own JSON text reads back exactly (it is stored and shared
    // as JSON): Boost.JSON 1.81 reads a number of many digits to within an ulp, not
    // always to the nearest double, so a long spelling settles on its JSON form's value.
    double r = *n;
    for (int i = 0; i < 4; ++i) {
        const double again = boost::json::parse(boost::json::serialize(boost::json::value(r))).to_number<double>();
        if (again == r) break;
        r = again;
    }
    out = r;
    return std::nullopt;
}

std::optional<std::string> check_reason(const boost::json::value& v, std::string& out) {
    if (!v.is_string()) return "must be a string";
    const std::string_view s = v.get_string();
    if (s.size() > override_limits::max_reason_bytes)
        return "must be at most " + std::to_string(override_limits::max_reason_bytes) + " bytes";
    // It goes into logs and the status page as it is.
    if (std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
        return "must not contain control characters";
    out = std::string(s);
    return std::nullopt;
}

}  // namespace override_detail

namespace {

using namespace override_detail;
namespace json = boost::json;

constexpr std::string_view known_fields[] = {"concurrency", "rate", "pause_for", "pause_until", "reason", "expires_in"};

std::string hours_text(std::chrono::hours h) { return std::to_string(h.count() / 24) + " days (" + format_duration(h) + ")"; }

std::string number_text(double v) {
    char out[32];
    std::snprintf(out, sizeof out, "%g", v);
    return out;
}

// A duration as the config spells it ("10m") or a number of seconds, > 0 and <= max.
std::variant<wall_clock::duration, std::string> duration_of(const json::value& v, std::chrono::hours max) {
    double seconds = 0;
    if (v.is_string()) {
        const auto d = parse_duration(v.get_string());
        if (!d) return std::string("must be a duration like \"10m\", \"500ms\", \"1h\" or a number of seconds");
        seconds = std::chrono::duration<double>(*d).count();
    } else if (const auto n = number_of(v); n && std::isfinite(*n)) {
        seconds = *n;
    } else {
        return std::string("must be a duration like \"10m\", \"500ms\", \"1h\" or a number of seconds");
    }
    if (seconds <= 0) return std::string("must be positive");
    // Compared as seconds first: a huge number would overflow the nanosecond duration.
    if (seconds > std::chrono::duration<double>(max).count()) return "must be at most " + hours_text(max);
    // Whole milliseconds, as the override's JSON form keeps its times.
    const auto d = std::chrono::floor<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
    if (d.count() == 0) return std::string("must be at least 1ms");
    return wall_clock::duration(d);
}

// An RFC 3339 timestamp or a number of Unix seconds, after `now` and at most `max` ahead;
// to the millisecond, as the override's JSON form keeps it (`now` is a whole millisecond).
std::variant<wall_clock::time_point, std::string> moment_of(const json::value& v, wall_clock::time_point now,
                                                            std::chrono::hours max) {
    using seconds_d = std::chrono::duration<double>;
    const double now_s = seconds_d(now.time_since_epoch()).count();
    double at_s = 0;
    std::optional<wall_clock::time_point> exact;  // a timestamp as written, not through a double
    if (v.is_string()) {
        exact = parse_timestamp(v.get_string());
        if (!exact) return std::string("must be an RFC 3339 timestamp like \"2026-12-05T12:00:00Z\" or a number of Unix seconds");
        at_s = seconds_d(exact->time_since_epoch()).count();
    } else if (const auto n = number_of(v); n && std::isfinite(*n)) {
        at_s = *n;
    } else {
        return std::string("must be an RFC 3339 timestamp like \"2026-12-05T12:00:00Z\" or a number of Unix seconds");
    }
    if (at_s <= now_s) return std::string("must be in the future");
    if (at_s - now_s > seconds_d(max).count()) return "must be at most " + hours_text(max) + " ahead";
    const auto at = to_millisecond(
        exact ? *exact : wall_clock::time_point(std::chrono::duration_cast<wall_clock::duration>(seconds_d(at_s))));
    if (at <= now) return std::string("must be in the future");  // less than a millisecond ahead
    return at;
}

bool blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

}  // namespace

bool live_override::expired(wall_clock::time_point now) const { return expires_at && now >= *expires_at; }

std::variant<live_override, body_error> parse_override_body(std::string_view body, std::string_view key,
                                                            const host_policy& registry, std::string_view set_by,
                                                            wall_clock::time_point now) {
    json::error_code ec;
    const json::value root = json::parse(body, ec);
    if (ec) return body_error{"body", "not JSON: " + ec.message()};
    if (!root.is_object()) return body_error{"body", "must be a JSON object"};
    const json::object& fields = root.get_object();

    for (const auto& field : fields)
        if (std::find(std::begin(known_fields), std::end(known_fields), field.key()) == std::end(known_fields))
            return body_error{field.key().empty() ? std::string("body") : std::string(field.key()),
                              "unknown field '" + std::string(field.key()) +
                                  "' (known: concurrency, rate, pause_for, pause_until, reason, expires_in)"};
    // null is absent: the API's own form writes absent values as null.
    auto given = [&fields](std::string_view name) -> const json::value* {
        const json::value* v = fields.if_contains(name);
        return v && !v->is_null() ? v : nullptr;
    };

    // Every time of an override is a whole millisecond, as its JSON form (the API's, the
    // state file's, the store's) keeps it: what a worker holds is what it shares.
    now = to_millisecond(now);
    live_override o;
    o.key = std::string(key);
    o.set_by = std::string(set_by);
    o.set_at = now;
    if (const auto* v = given("concurrency")) {
        std::size_t n = 0;
        if (auto bad = check_concurrency(*v, n)) return body_error{"concurrency", *bad};
        o.concurrency = n;
    }
    if (const auto* v = given("rate")) {
        double r = 0;
        if (auto bad = check_rate(*v, r)) return body_error{"rate", *bad};
        o.rate = r;
    }
    const auto* pause_for = given("pause_for");
    const auto* pause_until = given("pause_until");
    if (pause_for && pause_until) return body_error{"pause_until", "give pause_for or pause_until, not both"};
    if (pause_for) {
        auto d = duration_of(*pause_for, override_limits::max_pause);
        if (auto* bad = std::get_if<std::string>(&d)) return body_error{"pause_for", *bad};
        o.pause_until = now + std::get<wall_clock::duration>(d);
    }
    if (pause_until) {
        auto t = moment_of(*pause_until, now, override_limits::max_pause);
        if (auto* bad = std::get_if<std::string>(&t)) return body_error{"pause_until", *bad};
        o.pause_until = std::get<wall_clock::time_point>(t);
    }
    if (const auto* v = given("reason"))
        if (auto bad = check_reason(*v, o.reason)) return body_error{"reason", *bad};
    if (const auto* v = given("expires_in")) {
        auto d = duration_of(*v, override_limits::max_expires_in);
        if (auto* bad = std::get_if<std::string>(&d)) return body_error{"expires_in", *bad};
        o.expires_at = now + std::get<wall_clock::duration>(d);
    }

    if (!o.concurrency && !o.rate && !o.pause_until)
        return body_error{"body", "needs at least one of concurrency, rate, pause_for, pause_until"};
    // A pause alone means nothing once it ends: let it go with it, not linger until deleted.
    if (!o.expires_at && !o.concurrency && !o.rate) o.expires_at = o.pause_until;
    if (blank(o.reason)) {
        if (o.concurrency && *o.concurrency > registry.concurrency)
            return body_error{"reason", "raising concurrency above " + std::to_string(registry.concurrency) +
                                            " needs a reason"};
        if (o.rate && *o.rate > registry.rate)
            return body_error{"reason", "raising rate above " + number_text(registry.rate) + "/s needs a reason"};
    }
    return o;
}

host_policy with_override(const host_policy& registry, const live_override& o) {
    host_policy p = registry;
    if (o.concurrency) {
        p.concurrency = *o.concurrency;
        p.adaptive.hard_max = *o.concurrency;  // the adaptive ceiling is max(concurrency, hard_max)
    }
    if (o.rate) {
        p.rate = *o.rate;
        p.burst = std::min(registry.burst, std::max(1.0, *o.rate));
    }
    return p;
}

std::string summary_of(const live_override* o) {
    if (!o) return "none";
    std::string out;
    const auto add = [&](const std::string& part) { (out += out.empty() ? "" : ", ") += part; };
    if (o->concurrency) add("concurrency " + std::to_string(*o->concurrency));
    if (o->rate) add("rate " + number_text(*o->rate) + "/s");
    if (o->pause_until) add("paused until " + format_timestamp(*o->pause_until));
    if (o->expires_at) add("expires " + format_timestamp(*o->expires_at));
    return out;
}

}  // namespace politeproxy
