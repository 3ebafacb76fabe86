#pragma once
// Proxy authentication (security.users_file): an htpasswd-style file of users and password
// hashes, and the check of a request's Proxy-Authorization against it. Sans-io: the file's
// text goes in, a verdict comes out.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>

namespace politeproxy {

/// The users of security.users_file, one `user:hash` per line (# comments, blank lines).
/// Hashes are checked by libraries, never by hand: bcrypt (`$2y$`, `$2b$`, `$2a$`, as
/// `htpasswd -B` writes) and SHA-crypt (`$5$`, `$6$`) through libcrypt (libxcrypt);
/// `{SHA}` (base64 SHA-1, `htpasswd -s`) through OpenSSL. Apache's `$apr1$` MD5, plain
/// `crypt` DES and plaintext are refused at load: a weak or unknown hash is an error, not
/// a silent "never matches".
///
/// Cost: a bcrypt check takes milliseconds of CPU by design (tens to hundreds at higher
/// costs): the proxy runs it off its I/O threads (server/password_checks). A credential
/// checked once is remembered (right or wrong) as a keyed digest, so a crawler's every
/// request after its first costs one SHA-256 (`recall`); the memory is bounded
/// (`remembered` credentials, then it starts over). A reload loads a new instance, which
/// forgets.
///
/// Thread safety: check() from any thread (one mutex around the memory).
class proxy_users {
public:
    struct load_error {
        std::size_t line = 0;  ///< 1-based, 0 for the file as a whole
        std::string message;
    };
    /// Parses the file's text; the first bad line is an error.
    static std::variant<proxy_users, load_error> parse(std::string_view text);

    proxy_users(proxy_users&&) noexcept;
    proxy_users& operator=(proxy_users&&) noexcept;
    ~proxy_users();

    /// The user a Proxy-Authorization value (`Basic base64(user:password)`) names when
    /// its password is right; nothing when the value is missing, malformed or wrong.
    std::optional<std::string> check(std::string_view proxy_authorization) const;

    struct verdict {
        std::optional<std::string> user;  ///< nothing: refused
    };
    /// check()'s verdict when it costs no bcrypt/SHA-crypt hashing: the value is malformed,
    /// these credentials were checked before, or the user's entry is {SHA}. Nothing when
    /// only hashing can tell: then check() them off the I/O threads.
    std::optional<verdict> recall(std::string_view proxy_authorization) const;

    std::size_t size() const;

    static constexpr std::size_t remembered = 10000;

private:
    proxy_users();
    std::optional<verdict> decide(std::string_view proxy_authorization, bool may_hash) const;
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace politeproxy
