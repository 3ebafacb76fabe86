// Whose request it is (clients:): the config's rules, and the name a request gets from
// its credentials, its address or its header.
#include "config_loading.hpp"
#include "politeproxy/server/client_identity.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;
using testing::load_error;
using testing::load_ok;

namespace {

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

clients_config by_header() {
    clients_config c;
    c.identify_by = clients_config::identity::header;
    c.header = "x-crawler";
    return c;
}

}  // namespace

TEST_CASE("clients: absent is off; present, its defaults are the SPEC's") {
    CHECK_FALSE(load_ok("").clients);
    const auto c = load_ok("clients: { identify_by: address }\n").clients;
    REQUIRE(c);
    CHECK(c->identify_by == clients_config::identity::address);
    CHECK(c->fair);
    CHECK(c->max_waiting == 10000);
    CHECK(c->max_in_flight == 10000);
    CHECK(c->weight_of("anyone") == 1);
    CHECK(load_ok("metrics: { max_client_series: 5 }\n").max_client_series == 5);
}

TEST_CASE("clients: every field read, every mistake named with its line") {
    const auto c = load_ok("clients:\n  identify_by: header:X-Crawler\n  share: fifo\n  weights: {nightly: 1, urgent: 4}\n"
                           "  max_waiting: 50\n  max_in_flight: 7\n")
                       .clients;
    REQUIRE(c);
    CHECK(c->header == "x-crawler");
    CHECK_FALSE(c->fair);
    CHECK(c->weight_of("urgent") == 4);
    CHECK(c->max_waiting == 50);
    CHECK(c->max_in_flight == 7);

    CHECK(has(load_error("clients: {identify_by: user}\n"), "needs security.users_file"));
    CHECK(has(load_error("clients: {}\n"), "needs security.users_file"));  // user is the default
    CHECK(has(load_error("clients: {identify_by: cookie}\n"), "is not user, address or header:NAME"));
    CHECK(has(load_error("clients: {identify_by: \"header:\"}\n"), "does not name a header field"));
    CHECK(has(load_error("clients: {identify_by: \"header:x y\"}\n"), "does not name a header field"));
    CHECK(has(load_error("clients: {identify_by: \"header:Host\"}\n"), "reads or writes itself"));
    CHECK(has(load_error("clients: {identify_by: \"header:Proxy-Authorization\"}\n"), "reads or writes itself"));
    CHECK(has(load_error("clients: {identify_by: address, share: random}\n"), "is not fair or fifo"));
    CHECK(has(load_error("clients: {identify_by: address, weights: {a: 0}}\n"), "test.yaml:1: clients.weights.a"));
    CHECK(has(load_error("clients: {identify_by: address, weights: {a: 1.5}}\n"), "whole number"));
    CHECK(has(load_error("clients: {identify_by: address, weights: {a: 1001}}\n"), "at most 1000"));
    CHECK(has(load_error("clients: {identify_by: address, max_waiting: 0}\n"), "clients.max_waiting"));
    CHECK(has(load_error("clients: {identify_by: address, fair: true}\n"), "unknown key 'fair' in clients"));
    CHECK(has(load_error("clients:\n  identify_by: address\n  weights: {a: 2, a: 3}\n"), "listed twice"));
}

TEST_CASE("a request's client: its user, its address, or its header") {
    clients_config users;
    users.identify_by = clients_config::identity::user;
    CHECK(client_name(users, {.user = "alice", .peer = "127.0.0.2"}) == "alice");
    CHECK(client_name(users, {.peer = "127.0.0.2"}) == "anonymous");
    CHECK(client_name(users, {.outer = "bob"}) == "bob");  // inside the TLS of bob's CONNECT

    clients_config addresses;
    addresses.identify_by = clients_config::identity::address;
    CHECK(client_name(addresses, {.user = "alice", .peer = "127.0.0.3"}) == "127.0.0.3");
    CHECK(address_text(boost::asio::ip::make_address("::ffff:127.0.0.9")) == "127.0.0.9");
    CHECK(address_text(boost::asio::ip::make_address("::1")) == "::1");

    const auto c = by_header();
    CHECK(client_name(c, {.header_fields = 1, .header = " nightly-crawl "}) == "nightly-crawl");
    CHECK(client_name(c, {.header_fields = 1, .header = "team:spider/2@eu=1"}) == "team:spider/2@eu=1");
    CHECK(client_name(c, {.header_fields = 0}) == "anonymous");
    // Two fields (which one?), an empty value, spaces, quotes, control bytes or a name
    // longer than 64 bytes: not a name; the CONNECT's client, else anonymous.
    CHECK(client_name(c, {.header_fields = 2, .header = "a"}) == "anonymous");
    CHECK(client_name(c, {.header_fields = 1, .header = "  "}) == "anonymous");
    CHECK(client_name(c, {.header_fields = 1, .header = "two words"}) == "anonymous");
    CHECK(client_name(c, {.header_fields = 1, .header = "\"quoted\""}) == "anonymous");
    CHECK(client_name(c, {.header_fields = 1, .header = "nul\x01"}) == "anonymous");
    CHECK(client_name(c, {.header_fields = 1, .header = std::string(64, 'a')}) == std::string(64, 'a'));
    CHECK(client_name(c, {.header_fields = 1, .header = std::string(65, 'a')}) == "anonymous");
    CHECK(client_name(c, {.header_fields = 1, .header = "_other"}) == "anonymous");  // the metrics' name
    CHECK(client_name(c, {.header_fields = 1, .header = "inner", .outer = "outer"}) == "inner");
    CHECK(client_name(c, {.header_fields = 0, .outer = "outer"}) == "outer");
}
