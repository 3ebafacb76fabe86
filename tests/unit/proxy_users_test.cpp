// security.users_file: which entries load, and what a Proxy-Authorization value proves.
#include "politeproxy/policy/proxy_users.hpp"

#include <doctest/doctest.h>

#include <crypt.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstring>
#include <string>

using namespace politeproxy;

namespace {

std::string base64(std::string_view raw) {
    std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

std::string basic(std::string_view user, std::string_view password) {
    return "Basic " + base64(std::string(user) + ":" + std::string(password));
}

std::string bcrypt(const char* password) {
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    REQUIRE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt));
    struct crypt_data data {};
    return crypt_rn(password, salt, &data, sizeof data);
}

std::string sha(const char* password) {
    unsigned char d[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(password), std::strlen(password), d);
    return "{SHA}" + base64(std::string_view(reinterpret_cast<const char*>(d), sizeof d));
}

proxy_users load(const std::string& text) {
    auto r = proxy_users::parse(text);
    REQUIRE(std::holds_alternative<proxy_users>(r));
    return std::get<proxy_users>(std::move(r));
}

proxy_users::load_error error_of(const std::string& text) {
    auto r = proxy_users::parse(text);
    REQUIRE(std::holds_alternative<proxy_users::load_error>(r));
    return std::get<proxy_users::load_error>(r);
}

}  // namespace

TEST_CASE("bcrypt, SHA-crypt and {SHA} entries load; weak or unknown ones are errors with their line") {
    const auto users = load("# comment\r\n\ncrawler:" + bcrypt("s3cret") + "\r\nlegacy:" + sha("pw") + "  \n");
    CHECK(users.size() == 2);
    CHECK(error_of("a:$apr1$abcdefgh$0123456789abcdefghijkl\n").message.find("$apr1$") != std::string::npos);
    CHECK(error_of("ok:" + sha("x") + "\nbob:secret\n").line == 2);
    CHECK(error_of("a:" + sha("x") + "\na:" + sha("y") + "\n").message.find("twice") != std::string::npos);
    CHECK(error_of("no-colon\n").line == 1);
    CHECK(error_of(":" + sha("x") + "\n").line == 1);
    CHECK(error_of("a:{SHA}short\n").line == 1);
    CHECK(error_of("a:$2b$04$tooshort\n").line == 1);
    const std::string whole = bcrypt("x");
    CHECK(error_of("a:" + whole.substr(0, 59) + "\n").line == 1);  // truncated: would never match
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    REQUIRE(crypt_gensalt_rn("$6$", 5000, nullptr, 0, setting, sizeof setting));
    struct crypt_data data {};
    CHECK(load("b:" + std::string(crypt_rn("pw", setting, &data, sizeof data)) + "\n")
              .check(basic("b", "pw")) == "b");
    // rounds libcrypt would clamp: the entry could never match.
    CHECK(error_of("c:$6$rounds=10$saltsalt$" + std::string(86, 'a') + "\n").line == 1);
    CHECK(error_of("c:$5$rounds=x$saltsalt$" + std::string(43, 'a') + "\n").line == 1);
    CHECK(error_of("# only comments\n\n").line == 0);
}

TEST_CASE("a Proxy-Authorization value names a user only with the right password") {
    const auto users = load("crawler:" + bcrypt("s3cret") + "\nlegacy:" + sha("pw:with:colons") + "\n");
    CHECK(users.check(basic("crawler", "s3cret")) == "crawler");
    CHECK(users.check(basic("crawler", "s3cret")) == "crawler");  // remembered
    CHECK(users.check("basic " + base64("crawler:s3cret")) == "crawler");  // the scheme is case-insensitive
    CHECK(users.check(basic("legacy", "pw:with:colons")) == "legacy");   // the first colon splits
    CHECK_FALSE(users.check(basic("crawler", "S3cret")));
    CHECK_FALSE(users.check(basic("crawler", "S3cret")));  // remembered as wrong
    CHECK_FALSE(users.check(basic("mallory", "s3cret")));
    CHECK_FALSE(users.check(""));
    CHECK_FALSE(users.check("Basic"));
    CHECK_FALSE(users.check("Bearer " + base64("crawler:s3cret")));
    CHECK_FALSE(users.check("Basic " + base64("crawler:s3cret") + "!"));
    CHECK_FALSE(users.check("Basic " + base64("crawler")));                       // no colon
    CHECK_FALSE(users.check("Basic " + base64(std::string("crawler:s3cret\0x", 16))));  // a NUL in the password
}

TEST_CASE("recall answers without hashing only what needs none: malformed values, remembered credentials, {SHA}") {
    const auto users = load("crawler:" + bcrypt("s3cret") + "\nlegacy:" + sha("pw") + "\n");
    const auto refused = [](const std::optional<proxy_users::verdict>& v) { return v && !v->user; };
    CHECK(refused(users.recall("Basic")));
    CHECK(refused(users.recall("Basic " + base64("crawler"))));
    CHECK(refused(users.recall("Bearer x")));
    CHECK_FALSE(users.recall(basic("crawler", "s3cret")));  // new bcrypt credentials: only check() can tell
    CHECK_FALSE(users.recall(basic("crawler", "guess")));
    CHECK_FALSE(users.recall(basic("mallory", "s3cret")));  // an unknown user costs a known user's hash
    CHECK(users.check(basic("crawler", "s3cret")) == "crawler");
    CHECK_FALSE(users.check(basic("crawler", "guess")));
    const auto right = users.recall(basic("crawler", "s3cret"));
    CHECK((right && right->user == "crawler"));
    CHECK(refused(users.recall(basic("crawler", "guess"))));  // remembered as wrong
    const auto legacy = users.recall(basic("legacy", "pw"));  // {SHA}: one SHA-1, answered at once
    CHECK((legacy && legacy->user == "legacy"));
    CHECK(refused(users.recall(basic("legacy", "nope"))));
}
