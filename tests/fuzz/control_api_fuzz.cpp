// The control API's parsers as hostile bytes: an override body (PUT), the state file, an
// override from the fleet store, the token file. Each answers (a value, or an error that
// names a field or says what is wrong), never crashes; what is accepted survives its own
// JSON form unchanged, and never breaks the limits the API promises.
#include "fuzz_input.hpp"

#include "politeproxy/policy/admin_tokens.hpp"
#include "politeproxy/policy/host_policy.hpp"
#include "politeproxy/policy/live_override.hpp"

#include <cmath>
#include <variant>

using namespace politeproxy;

namespace {

void check_override(const live_override& o) {
    if (o.concurrency) fuzz::require(*o.concurrency >= 1 && *o.concurrency <= override_limits::max_concurrency,
                                     "a concurrency out of bounds accepted");
    if (o.rate) fuzz::require(*o.rate > 0 && std::isfinite(*o.rate), "a rate that is not positive and finite");
    fuzz::require(o.reason.size() <= override_limits::max_reason_bytes, "a reason over the limit");
    const auto again = override_from_json(to_json(o));
    fuzz::require(again && *again == o, "an override that does not survive its JSON form");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto text = fuzz::text(data + 1, size - 1);
    const auto now = wall_clock::time_point(std::chrono::seconds(1'800'000'000));
    switch (data[0] % 4) {
    case 0: {
        const host_policy registry;
        const auto parsed = parse_override_body(text, "fuzz.test", registry, "fuzzer", now);
        if (const auto* bad = std::get_if<body_error>(&parsed)) {
            fuzz::require(!bad->field.empty() && !bad->message.empty(), "a 400 that names no field");
        } else {
            const auto& o = std::get<live_override>(parsed);
            check_override(o);
            fuzz::require(o.concurrency || o.rate || o.pause_until, "an override that changes nothing");
            const bool raises = (o.concurrency && *o.concurrency > registry.concurrency) || (o.rate && *o.rate > registry.rate);
            fuzz::require(!raises || o.reason.find_first_not_of(" \t") != std::string::npos, "a raise without a reason");
        }
        break;
    }
    case 1: {
        const auto parsed = parse_state_file(text);
        if (const auto* all = std::get_if<std::vector<live_override>>(&parsed))
            for (const auto& o : *all) check_override(o);
        else fuzz::require(!std::get<std::string>(parsed).empty(), "a state file refused without a reason");
        break;
    }
    case 2:
        if (const auto o = override_from_json(text)) check_override(*o);
        break;
    default: {
        const auto parsed = admin_tokens::parse(text);
        if (const auto* tokens = std::get_if<admin_tokens>(&parsed)) {
            fuzz::require(tokens->size() >= 1, "a token file without tokens loaded");
            fuzz::require(!tokens->name_for("Bearer ").has_value(), "an empty token accepted");
        }
        break;
    }
    }
    return 0;
}
