#include "politeproxy/base/duration.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using namespace std::chrono_literals;

TEST_CASE("durations need a unit") {
    CHECK(parse_duration("250ms") == clock::duration(250ms));
    CHECK(parse_duration("30s") == clock::duration(30s));
    CHECK(parse_duration("1.5m") == clock::duration(90s));
    CHECK(parse_duration("2h") == clock::duration(2h));
    for (auto bad : {"", "30", "s", "-1s", "1d", "1 s", "1.2.3s", "abc"}) CHECK_MESSAGE(!parse_duration(bad), bad);
}

TEST_CASE("durations print in their largest exact unit") {
    CHECK(format_duration(90s) == "90s");
    CHECK(format_duration(10min) == "10m");
    CHECK(format_duration(1500ms) == "1500ms");
    CHECK(format_duration(1h) == "1h");
}
