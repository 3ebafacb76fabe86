#pragma once
// Who may change things through the admin API (admin.token_file, SPEC.md "Admin API"):
// named bearer tokens. Sans-io: the file's text goes in, a name or nothing comes out.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace politeproxy {

/// The tokens of admin.token_file, one `NAME:TOKEN` a line. Only SHA-256 digests of the
/// tokens are kept, so a memory dump or a log of this object shows no token. A check
/// hashes the presented token and compares it with every entry in constant time
/// (CRYPTO_memcmp, no early exit), so neither the content of a token nor which entry it
/// matched shows in the time taken.
///
/// Thread safety: immutable once parsed; name_for() from any thread.
class admin_tokens {
public:
    /// Lines `NAME:TOKEN`: NAME of letters, digits, '-', '_', '.'; TOKEN at least
    /// `min_token_bytes` printable non-space bytes. Blank lines and `#` comments are
    /// ignored, a CR before the LF too. Error text, with the line number, otherwise: also
    /// for a name or a token given twice, and for a file with no token at all.
    static std::variant<admin_tokens, std::string> parse(std::string_view text);

    /// The name of the token an `Authorization` field value ("Bearer TOKEN", the scheme
    /// in any case) carries, if it is one of them.
    std::optional<std::string> name_for(std::string_view authorization) const;

    std::size_t size() const { return entries_.size(); }

    static constexpr std::size_t min_token_bytes = 16;

private:
    using digest = std::array<unsigned char, 32>;
    struct entry {
        std::string name;
        digest token_digest;
    };
    static digest sha256(std::string_view token);

    admin_tokens() = default;
    std::vector<entry> entries_;
};

}  // namespace politeproxy
