// Which way a destination takes: the first route that matches, then its pick.
#include "politeproxy/policy/parent_route.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using namespace politeproxy;

namespace {

parent_route route(std::vector<std::string> names, std::vector<std::string> networks, std::vector<std::size_t> via) {
    parent_route r;
    r.names = std::move(names);
    for (const auto& n : networks) r.networks.push_back(*parse_network(n));
    r.via = std::move(via);
    return r;
}

std::vector<way_state> ways(std::initializer_list<way_state> w) { return w; }

}  // namespace

TEST_CASE("the first route that matches wins, by name or by the destination's address") {
    const std::vector<parent_route> routes{route({"*.example.com"}, {}, {0}), route({}, {"203.0.113.0/24"}, {1}),
                                           route({"api.example.com"}, {}, {2})};
    CHECK(route_for(routes, "www.example.com", {}) == &routes[0]);
    CHECK(route_for(routes, "api.example.com", {}) == &routes[0]);  // first match, not most specific
    CHECK(route_for(routes, "example.com", {}) == nullptr);         // *.suffix is strictly under it
    const ip_bytes inside = *parse_ip("203.0.113.7"), outside = *parse_ip("198.51.100.1");
    CHECK(route_for(routes, "shop.test", std::vector{outside, inside}) == &routes[1]);
    CHECK(route_for(routes, "shop.test", std::vector{outside}) == nullptr);
    CHECK_FALSE(route_needs_addresses(routes, "www.example.com"));  // named before any network route
    CHECK(route_needs_addresses(routes, "api.example.net"));         // the network route may hold it
    CHECK(route_needs_addresses(std::vector{routes[1], routes[0]}, "www.example.com"));  // a network route first
    CHECK_FALSE(route_needs_addresses(std::vector{routes[0], routes[2]}, "shop.test"));
}

TEST_CASE("round_robin: each usable way in turn, as often as its weight") {
    const auto w = ways({{true, 0, 1, "a"}, {true, 0, 2, "b"}, {true, 0, 1, "c"}});
    std::map<std::size_t, int> picked;
    for (std::uint64_t turn = 0; turn < 400; ++turn)
        ++picked[*pick_way(parent_route::pick_kind::round_robin, w, "h.test", turn)];
    CHECK(picked[0] == 100);
    CHECK(picked[1] == 200);
    CHECK(picked[2] == 100);
}

TEST_CASE("round_robin: a way that is not usable passes its turn on; none usable is nothing") {
    const auto w = ways({{true, 0, 1, "a"}, {false, 0, 1, "b"}, {true, 0, 1, "c"}});
    std::map<std::size_t, int> picked;
    for (std::uint64_t turn = 0; turn < 300; ++turn)
        ++picked[*pick_way(parent_route::pick_kind::round_robin, w, "h.test", turn)];
    CHECK(picked.count(1) == 0);
    CHECK(picked[0] + picked[2] == 300);
    CHECK_FALSE(pick_way(parent_route::pick_kind::round_robin, ways({{false, 0, 1, "a"}}), "h.test", 0));
}

TEST_CASE("least_busy: the fewest carried per unit of weight, ties to the earlier way") {
    using k = parent_route::pick_kind;
    CHECK(*pick_way(k::least_busy, ways({{true, 4, 1, "a"}, {true, 3, 1, "b"}}), "h", 0) == 1);
    CHECK(*pick_way(k::least_busy, ways({{true, 4, 2, "a"}, {true, 3, 1, "b"}}), "h", 0) == 0);  // 2 per weight < 3
    CHECK(*pick_way(k::least_busy, ways({{true, 2, 1, "a"}, {true, 2, 1, "b"}}), "h", 0) == 0);
    CHECK(*pick_way(k::least_busy, ways({{false, 0, 1, "a"}, {true, 9, 1, "b"}}), "h", 0) == 1);
}

TEST_CASE("by_host: one way per host key while it is usable; only a down way's hosts move") {
    using k = parent_route::pick_kind;
    auto w = ways({{true, 0, 1, "a"}, {true, 0, 1, "b"}, {true, 0, 1, "c"}});
    std::map<std::string, std::size_t> first;
    std::map<std::size_t, int> spread;
    for (int h = 0; h < 600; ++h) {
        const std::string key = "host" + std::to_string(h) + ".test";
        first[key] = *pick_way(k::by_host, w, key, 0);
        ++spread[first[key]];
        CHECK(*pick_way(k::by_host, w, key, 12345) == first[key]);  // the turn does not matter
    }
    for (std::size_t i = 0; i < 3; ++i) CHECK(spread[i] > 120);  // about 200 each
    w[1].usable = false;
    for (const auto& [key, was] : first) {
        const std::size_t now = *pick_way(k::by_host, w, key, 0);
        if (was != 1) CHECK(now == was);
        else CHECK(now != 1);
    }
}
