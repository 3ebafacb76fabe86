// Retry-After values: never more than the cap, never negative, never a crash.
#include "fuzz_input.hpp"

#include "politeproxy/policy/retry_after.hpp"

using namespace politeproxy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto cap = std::chrono::hours(1);
    const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'790'000'000));
    if (const auto wait = parse_retry_after(fuzz::text(data, size), now, cap)) {
        fuzz::require(*wait <= cap, "Retry-After beyond the cap");
        fuzz::require(*wait >= clock::duration::zero(), "negative Retry-After");
    }
    return 0;
}
