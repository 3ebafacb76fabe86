// admin.token_file: which files load, and which name an Authorization value carries.
#include "politeproxy/policy/admin_tokens.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;

namespace {

admin_tokens loaded(std::string_view text) {
    auto r = admin_tokens::parse(text);
    if (auto* e = std::get_if<std::string>(&r)) FAIL(*e);
    return std::get<admin_tokens>(std::move(r));
}

std::string error_of(std::string_view text) {
    auto r = admin_tokens::parse(text);
    INFO(text);
    REQUIRE(std::holds_alternative<std::string>(r));
    return std::get<std::string>(r);
}

const std::string alice_token = "a1b2c3d4e5f6a7b8c9d0";
const std::string bob_token = "Zz-9_+/=~!Zz-9_+/=~!xy";

}  // namespace

TEST_CASE("admin tokens: names and tokens, comments and blank lines, CRLF") {
    const admin_tokens t = loaded("# operators\n\nalice:" + alice_token + "\r\n  # bob below\nbob.ops-1_x:" + bob_token);
    CHECK(t.size() == 2);
    CHECK(t.name_for("Bearer " + alice_token) == "alice");
    CHECK(t.name_for("Bearer " + bob_token) == "bob.ops-1_x");
}

TEST_CASE("admin tokens: a bad line is refused with its number") {
    CHECK(error_of("alice:" + alice_token + "\nno colon here\n") == "line 2: expected NAME:TOKEN");
    CHECK(error_of("# c\n:" + alice_token + "\n").find("line 2: the name") == 0);
    CHECK(error_of("al ice:" + alice_token + "\n").find("line 1: the name") == 0);
    CHECK(error_of("alice:short\n").find("line 1: the token of alice must be at least 16") == 0);
    CHECK(error_of("alice:" + alice_token + " x\n").find("line 1: the token of alice") == 0);
    CHECK(error_of("alice:" + alice_token + "\tx\n").find("line 1: the token of alice") == 0);
    CHECK(error_of("\n\nalice:" + alice_token + "\nbob:" + bob_token + "\nalice:" + bob_token + "x\n") ==
          "line 5: the name alice is given twice (first on line 3)");
    CHECK(error_of("alice:" + alice_token + "\nbob:" + alice_token + "\n") ==
          "line 2: the token of bob is the token of alice (line 1)");
    CHECK(error_of("").find("no tokens") == 0);
    CHECK(error_of("# only a comment\n\n").find("no tokens") == 0);
    // Exactly the minimum is enough.
    CHECK(loaded("alice:" + std::string(admin_tokens::min_token_bytes, 'k')).size() == 1);
}

TEST_CASE("admin tokens: Bearer, in any case; a wrong, missing or other-scheme value names nobody") {
    const admin_tokens t = loaded("alice:" + alice_token + "\nbob:" + bob_token + "\n");
    CHECK(t.name_for("Bearer " + alice_token) == "alice");
    CHECK(t.name_for("bearer " + alice_token) == "alice");
    CHECK(t.name_for("BEARER   " + bob_token + "  ") == "bob");
    CHECK(t.name_for(" Bearer " + bob_token) == "bob");
    CHECK_FALSE(t.name_for("Bearer " + alice_token + "x"));
    CHECK_FALSE(t.name_for("Bearer " + alice_token.substr(1)));
    CHECK_FALSE(t.name_for("Bearer wrong-token-wrong-token"));
    CHECK_FALSE(t.name_for(""));
    CHECK_FALSE(t.name_for("Bearer"));
    CHECK_FALSE(t.name_for("Bearer "));
    CHECK_FALSE(t.name_for("Bearer" + alice_token));
    CHECK_FALSE(t.name_for(alice_token));
    CHECK_FALSE(t.name_for("Basic " + alice_token));
    CHECK_FALSE(t.name_for("Token " + alice_token));
    CHECK_FALSE(t.name_for("Bearer " + alice_token + " " + bob_token));
}
