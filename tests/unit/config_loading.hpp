#pragma once
// Loading a configuration text in the config tests: the config, or the loader's error.
#include "politeproxy/config/config_load.hpp"

#include <doctest/doctest.h>

#include <string>

namespace politeproxy::testing {

inline config load_ok(const std::string& yaml) {
    auto c = load_config_text(yaml, "test.yaml");
    INFO(yaml);
    REQUIRE_MESSAGE(c.has_value(), (c ? std::string() : c.error()));
    return *c;
}

inline std::string load_error(const std::string& yaml) {
    auto c = load_config_text(yaml, "test.yaml");
    INFO(yaml);
    REQUIRE_FALSE(c.has_value());
    return c.error();
}

}  // namespace politeproxy::testing
