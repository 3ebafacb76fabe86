// The rules every request meets at the entry, in their order (policy/entry_rules.hpp).
#include "politeproxy/policy/entry_rules.hpp"

#include <doctest/doctest.h>

using namespace politeproxy;

namespace {

entry_facts head(std::string_view method, std::size_t fields = 3) {
    entry_facts f;
    f.method = entry_method_of(method);
    f.field_lines = fields;
    return f;
}

}  // namespace

TEST_CASE("entry rules: the method before Max-Forwards before the field count") {
    CHECK(judge_entry(head("TRACE", 500), 100).refusal == errc::method_not_allowed);
    auto twice = head("OPTIONS", 500);
    twice.max_forwards_fields = 2;
    twice.max_forwards = "1";
    CHECK(judge_entry(twice, 100).refusal == errc::bad_request);
    CHECK(judge_entry(head("GET", 101), 100).refusal == errc::header_too_large);
    CHECK_FALSE(judge_entry(head("GET", 100), 100).refusal);
}

TEST_CASE("entry rules: CONNECT only where the protocol tunnels") {
    auto connect = head("CONNECT");
    CHECK(judge_entry(connect, 100).refusal == errc::bad_request);
    connect.tunnels = true;
    CHECK_FALSE(judge_entry(connect, 100).refusal);
}

TEST_CASE("entry rules: Max-Forwards on OPTIONS") {
    auto options = head("OPTIONS");
    options.max_forwards_fields = 1;
    options.max_forwards = "0";
    auto v = judge_entry(options, 100);
    CHECK(v.answer_options);
    options.max_forwards = "3";
    v = judge_entry(options, 100);
    CHECK_FALSE(v.answer_options);
    CHECK(v.max_forwards == 2);
    options.max_forwards = "-1";
    CHECK(judge_entry(options, 100).refusal == errc::bad_request);
    options.max_forwards = "3x";
    CHECK(judge_entry(options, 100).refusal == errc::bad_request);
    // Other methods forward Max-Forwards as it came.
    auto get = head("GET");
    get.max_forwards_fields = 2;
    get.max_forwards = "x";
    v = judge_entry(get, 100);
    CHECK_FALSE(v.refusal);
    CHECK(v.max_forwards == -1);
}

TEST_CASE("entry rules: OPTIONS * is the proxy's") {
    auto options = head("OPTIONS");
    options.asterisk = true;
    CHECK(judge_entry(options, 100).answer_options);
    auto get = head("GET");
    get.asterisk = true;
    CHECK_FALSE(judge_entry(get, 100).answer_options);
}
