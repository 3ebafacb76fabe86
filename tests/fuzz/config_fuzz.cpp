// The config loader on arbitrary YAML: an error message or a config, never a crash;
// a config it accepts describes itself (--check-config's table) and has sane bounds
// (parents with a port and credentials that fit a header line, routes to parents that exist).
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
    for (const auto& p : c.parents) {
        fuzz::require(p.port >= 1 && !p.host.empty() && p.max_connections >= 1 && p.weight >= 1, "a parent out of bounds");
        fuzz::require(p.authorization.find_first_of("\r\n") == std::string::npos, "a line break in a parent's credentials");
    }
    for (const auto& r : c.routes) {
        fuzz::require(!r.via.empty() && (!r.names.empty() || !r.networks.empty()), "a route without ways or matches");
        for (std::size_t i : r.via) fuzz::require(i == parent_route::direct || i < c.parents.size(), "a route to no parent");
    }
    (void)describe(c, utc_today());
    return 0;
}
