// The stored form of live overrides: one JSON object each (the API's answer, a fleet
// store's value) and the state file that keeps them without a fleet. Reading is strict:
// a file cut mid-write or edited by hand into nonsense is refused whole, with what and
// where, rather than half-applied.
#include "politeproxy/policy/live_override.hpp"

#include "override_fields.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>

#include <algorithm>
#include <cmath>

namespace politeproxy {
namespace {

using namespace override_detail;
namespace json = boost::json;

constexpr std::int64_t state_file_version = 1;
constexpr std::string_view stored_fields[] = {"key",    "concurrency", "rate",   "pause_until",
                                              "reason", "expires_at",  "set_by", "set_at"};

json::value timestamp_value(const std::optional<wall_clock::time_point>& t) {
    return t ? json::value(format_timestamp(*t)) : json::value(nullptr);
}

json::object object_of(const live_override& o) {
    json::object out;
    out["key"] = o.key;
    out["concurrency"] = o.concurrency ? json::value(static_cast<std::uint64_t>(*o.concurrency)) : json::value(nullptr);
    // A whole rate as an integer: "20" reads better than "2E1" (both are the same number).
    if (!o.rate) out["rate"] = nullptr;
    else if (*o.rate == std::floor(*o.rate) && *o.rate <= override_limits::max_rate)
        out["rate"] = static_cast<std::int64_t>(*o.rate);
    else out["rate"] = *o.rate;
    out["pause_until"] = timestamp_value(o.pause_until);
    out["reason"] = o.reason;
    out["expires_at"] = timestamp_value(o.expires_at);
    out["set_by"] = o.set_by;
    out["set_at"] = format_timestamp(o.set_at);
    return out;
}

// "not JSON at byte N: why", or nothing with the parsed value in `out`.
std::optional<std::string> parse_json(std::string_view text, json::value& out) {
    json::stream_parser parser;
    json::error_code ec;
    const std::size_t used = parser.write(text.data(), text.size(), ec);
    if (!ec) parser.finish(ec);
    if (ec) return "not JSON at byte " + std::to_string(ec == json::error::incomplete ? text.size() : used) + ": " +
                   ec.message();
    out = parser.release();
    return std::nullopt;
}

std::optional<std::string> stored_timestamp(const json::value& v, std::string_view name,
                                            std::optional<wall_clock::time_point>& out) {
    if (v.is_null()) return std::nullopt;
    if (v.is_string())
        if ((out = parse_timestamp(v.get_string()))) {
            *out = to_millisecond(*out);  // as the override's own JSON form keeps it
            return std::nullopt;
        }
    return std::string(name) + " must be an RFC 3339 timestamp or null";
}

// One stored override, or "FIELD must ...".
std::variant<live_override, std::string> override_of(const json::value& v) {
    if (!v.is_object()) return std::string("must be a JSON object");
    const json::object& fields = v.get_object();
    for (const auto& field : fields)
        if (std::find(std::begin(stored_fields), std::end(stored_fields), field.key()) == std::end(stored_fields))
            return "unknown field '" + std::string(field.key()) + "'";
    static const json::value null_value;
    auto field = [&fields](std::string_view name) -> const json::value& {
        const json::value* f = fields.if_contains(name);
        return f ? *f : null_value;
    };

    live_override o;
    if (!field("key").is_string() || field("key").get_string().empty()) return std::string("key must be a non-empty string");
    o.key = std::string(field("key").get_string());
    if (const auto& c = field("concurrency"); !c.is_null()) {
        std::size_t n = 0;
        if (auto bad = check_concurrency(c, n)) return "concurrency " + *bad;
        o.concurrency = n;
    }
    if (const auto& r = field("rate"); !r.is_null()) {
        double rate = 0;
        if (auto bad = check_rate(r, rate)) return "rate " + *bad;
        o.rate = rate;
    }
    if (auto bad = stored_timestamp(field("pause_until"), "pause_until", o.pause_until)) return *bad;
    if (const auto& r = field("reason"); !r.is_null())
        if (auto bad = check_reason(r, o.reason)) return "reason " + *bad;
    if (auto bad = stored_timestamp(field("expires_at"), "expires_at", o.expires_at)) return *bad;
    if (!field("set_by").is_string()) return std::string("set_by must be a string");
    o.set_by = std::string(field("set_by").get_string());
    std::optional<wall_clock::time_point> set_at;
    if (field("set_at").is_null() || stored_timestamp(field("set_at"), "set_at", set_at))
        return std::string("set_at must be an RFC 3339 timestamp");
    o.set_at = *set_at;
    if (!o.concurrency && !o.rate && !o.pause_until)
        return std::string("needs at least one of concurrency, rate, pause_until");
    return o;
}

}  // namespace

std::string to_json(const live_override& o) { return json::serialize(object_of(o)); }

std::optional<live_override> override_from_json(std::string_view text) {
    json::value v;
    if (parse_json(text, v)) return std::nullopt;
    auto o = override_of(v);
    if (auto* good = std::get_if<live_override>(&o)) return std::move(*good);
    return std::nullopt;
}

std::string state_file_text(const std::vector<live_override>& all) {
    // One override a line: a person reading the file, or a diff of it, sees one per line.
    std::string out = "{\"version\": " + std::to_string(state_file_version) + ", \"overrides\": [";
    for (std::size_t i = 0; i < all.size(); ++i) out += (i ? ",\n  " : "\n  ") + to_json(all[i]);
    out += all.empty() ? "]}\n" : "\n]}\n";
    return out;
}

std::variant<std::vector<live_override>, std::string> parse_state_file(std::string_view text) {
    json::value root;
    if (auto bad = parse_json(text, root)) return *bad;
    if (!root.is_object()) return std::string("the state file must be a JSON object");
    const json::object& top = root.get_object();
    for (const auto& field : top)
        if (field.key() != "version" && field.key() != "overrides")
            return "unknown field '" + std::string(field.key()) + "' (a state file has version and overrides)";
    const json::value* version = top.if_contains("version");
    if (!version || !version->is_int64() || version->get_int64() != state_file_version)
        return "version must be " + std::to_string(state_file_version);
    const json::value* list = top.if_contains("overrides");
    if (!list || !list->is_array()) return std::string("overrides must be an array");

    std::vector<live_override> all;
    for (std::size_t i = 0; i < list->get_array().size(); ++i) {
        auto o = override_of(list->get_array()[i]);
        if (auto* bad = std::get_if<std::string>(&o)) return "overrides[" + std::to_string(i) + "]: " + *bad;
        auto& good = std::get<live_override>(o);
        auto same = std::find_if(all.begin(), all.end(), [&](const live_override& x) { return x.key == good.key; });
        if (same != all.end()) *same = std::move(good);
        else all.push_back(std::move(good));
    }
    return all;
}

}  // namespace politeproxy
