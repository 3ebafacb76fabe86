// The config loader on arbitrary YAML: an error message or a config, never a crash;
// a config it accepts describes itself (--check-config's table) and has sane bounds.
#include "fuzz_input.hpp"

#include "politeproxy/config/config_load.hpp"

#include <string>

using namespace politeproxy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto loaded = load_config_text(fuzz::text(data, size), "fuzz.yaml");
    if (!loaded) {
        fuzz::require(loaded.error().starts_with("fuzz.yaml"), "an error that does not name the file");
        return 0;
    }
    const config& c = *loaded;
    fuzz::require(c.defaults.concurrency >= 1, "concurrency below 1");
    fuzz::require(c.defaults.rate > 0, "rate not positive");
    for (const auto& h : c.hosts) fuzz::require(h.policy.concurrency >= 1 && h.policy.rate > 0, "host limit not positive");
    (void)describe(c, utc_today());
    return 0;
}
