// security.users_file and Proxy-Authorization as hostile bytes: the file parser loads or
// names a line within the file, never crashes; a header value authenticates no one but
// the file's user, and the remembered answer is the checked one.
#include "fuzz_input.hpp"

#include "politeproxy/policy/proxy_users.hpp"

#include <string>
#include <variant>

using namespace politeproxy;

namespace {

// One {SHA} user (fast to check): crawler / s3cret.
const proxy_users& known() {
    static const proxy_users users =
        std::get<proxy_users>(proxy_users::parse("crawler:{SHA}/vNB+F2HQ559kaLUZbmHHvZrXpg=\n"));
    return users;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto text = fuzz::text(data + 1, size - 1);
    if (data[0] & 1) {
        const auto parsed = proxy_users::parse(text);
        if (const auto* e = std::get_if<proxy_users::load_error>(&parsed)) {
            std::size_t lines = 1;
            for (char c : text) lines += c == '\n';
            fuzz::require(e->line <= lines, "an error on a line past the end");
            fuzz::require(!e->message.empty(), "an error without a message");
        } else {
            fuzz::require(std::get<proxy_users>(parsed).size() >= 1, "a users file with no users loaded");
        }
        return 0;
    }
    const auto user = known().check(text);
    if (user) fuzz::require(*user == "crawler", "authenticated as someone not in the file");
    // The second answer comes from the credential memory: it must be the first one.
    fuzz::require(known().check(text) == user, "the remembered answer differs from the checked one");
    return 0;
}
