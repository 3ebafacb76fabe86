#include "politeproxy/policy/proxy_users.hpp"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace politeproxy {
namespace {

enum class scheme : std::uint8_t { libcrypt, sha1 };

struct entry {
    scheme kind;
    std::string hash;  ///< libcrypt: the whole setting; sha1: the 20 raw bytes
};

bool starts_with_any(std::string_view s, std::initializer_list<std::string_view> prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return s.starts_with(p); });
}

// Strict base64 (RFC 4648, padded): nothing when `text` is not.
std::optional<std::string> base64_decode(std::string_view text) {
    if (text.empty() || text.size() % 4 != 0 || text.size() > 4096) return std::nullopt;
    const std::size_t pad = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
    for (std::size_t i = 0; i < text.size() - pad; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!std::isalnum(c) && c != '+' && c != '/') return std::nullopt;
    }
    std::string out(text.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
    if (n < 0) return std::nullopt;
    out.resize(static_cast<std::size_t>(n) - pad);
    return out;
}

bool crypt_alphabet(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '/';
    });
}

// A whole hash, not only a setting libcrypt accepts: a truncated entry would load and
// then never match. bcrypt: $2b$NN$ + 53 characters; SHA-crypt: $5$ or $6$, an optional
// rounds=N$, a salt of up to 16, then 43 ($5$) or 86 ($6$) characters.
bool complete_hash(std::string_view h) {
    if (h.starts_with("$2")) return h.size() == 60 && h[6] == '$' && crypt_alphabet(h.substr(7));
    const std::size_t digest = h.starts_with("$5$") ? 43 : 86;
    std::string_view rest = h.substr(3);
    if (rest.starts_with("rounds=")) {
        // libcrypt clamps rounds outside [1000, 999999999] and writes the clamped value:
        // such an entry could never match.
        const auto end = rest.find('$');
        if (end == std::string_view::npos) return false;
        const auto digits = rest.substr(7, end - 7);
        unsigned long rounds = 0;
        const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rounds);
        if (digits.empty() || ec != std::errc{} || p != digits.data() + digits.size() || rounds < 1000 ||
            rounds > 999999999)
            return false;
        rest.remove_prefix(end + 1);
    }
    const auto salt_end = rest.find('$');
    return salt_end != std::string_view::npos && salt_end <= 16 && rest.size() - salt_end - 1 == digest &&
           crypt_alphabet(rest.substr(salt_end + 1));
}

std::variant<entry, std::string> entry_of(std::string_view hash) {
    if (starts_with_any(hash, {"$2y$", "$2b$", "$2a$", "$5$", "$6$"})) {
        const std::string setting(hash);
        if (crypt_checksalt(setting.c_str()) != CRYPT_SALT_OK || !complete_hash(hash))
            return std::string("a malformed or unsupported bcrypt/SHA-crypt hash");
        return entry{scheme::libcrypt, setting};
    }
    if (hash.starts_with("{SHA}")) {
        auto raw = base64_decode(hash.substr(5));
        if (!raw || raw->size() != SHA_DIGEST_LENGTH) return std::string("{SHA} needs the base64 of a 20-byte SHA-1");
        return entry{scheme::sha1, std::move(*raw)};
    }
    if (hash.starts_with("$apr1$"))
        return std::string("Apache MD5 ($apr1$) is not supported: write bcrypt entries (htpasswd -B)");
    return std::string("not a bcrypt ($2y$), SHA-crypt ($5$, $6$) or {SHA} hash (plaintext and DES crypt are refused)");
}

bool verify(const entry& e, const std::string& password) {
    if (e.kind == scheme::sha1) {
        unsigned char digest[SHA_DIGEST_LENGTH];
        SHA1(reinterpret_cast<const unsigned char*>(password.data()), password.size(), digest);
        return CRYPTO_memcmp(digest, e.hash.data(), SHA_DIGEST_LENGTH) == 0;
    }
    struct crypt_data data {};
    const char* out = crypt_rn(password.c_str(), e.hash.c_str(), &data, sizeof data);
    if (!out || out[0] == '*') return false;
    const std::string_view computed(out);
    return computed.size() == e.hash.size() && CRYPTO_memcmp(computed.data(), e.hash.data(), e.hash.size()) == 0;
}

}  // namespace

struct proxy_users::impl {
    std::unordered_map<std::string, entry> users;
    const entry* decoy = nullptr;  ///< what an unknown user's password is hashed against: the costliest kind
    std::array<unsigned char, 32> key{};  ///< keys the digests of remembered credentials
    mutable std::mutex mutex;
    mutable std::unordered_set<std::string> right, wrong;

    std::string digest(std::string_view user, std::string_view password) const {
        std::string message(user);
        message += '\0';
        message += password;
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned int size = 0;
        HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
             message.size(), out, &size);
        OPENSSL_cleanse(message.data(), message.size());
        return std::string(reinterpret_cast<const char*>(out), size);
    }
};

proxy_users::proxy_users() : impl_(std::make_unique<impl>()) {
    if (RAND_bytes(impl_->key.data(), static_cast<int>(impl_->key.size())) != 1)
        throw std::runtime_error("proxy_users: no random bytes for the credential memory");
}
proxy_users::proxy_users(proxy_users&&) noexcept = default;
proxy_users& proxy_users::operator=(proxy_users&&) noexcept = default;
proxy_users::~proxy_users() = default;

std::size_t proxy_users::size() const { return impl_->users.size(); }

std::variant<proxy_users, proxy_users::load_error> proxy_users::parse(std::string_view text) {
    proxy_users out;
    std::size_t line_no = 0;
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
        ++line_no;
        if (line.ends_with('\r')) line.remove_suffix(1);
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;
        const auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return load_error{line_no, "expected user:hash"};
        const std::string user(line.substr(0, colon));
        auto e = entry_of(line.substr(colon + 1));
        if (auto* why = std::get_if<std::string>(&e)) return load_error{line_no, "user '" + user + "': " + *why};
        if (!out.impl_->users.emplace(user, std::get<entry>(std::move(e))).second)
            return load_error{line_no, "user '" + user + "' appears twice"};
    }
    if (out.impl_->users.empty()) return load_error{0, "no users: every request would be refused"};
    for (const auto& [name, e] : out.impl_->users)
        if (!out.impl_->decoy || e.kind == scheme::libcrypt) out.impl_->decoy = &e;
    return out;
}

std::optional<std::string> proxy_users::check(std::string_view value) const { return decide(value, true)->user; }

std::optional<proxy_users::verdict> proxy_users::recall(std::string_view value) const { return decide(value, false); }

std::optional<proxy_users::verdict> proxy_users::decide(std::string_view value, bool may_hash) const {
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    constexpr std::string_view basic = "basic ";
    if (value.size() <= basic.size()) return verdict{};
    for (std::size_t i = 0; i < basic.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(value[i])) != basic[i]) return verdict{};
    value.remove_prefix(basic.size());
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    auto decoded = base64_decode(value);
    if (!decoded) return verdict{};
    // The credentials leave no copy behind in freed memory.
    struct wipe {
        std::string& s;
        ~wipe() { OPENSSL_cleanse(s.data(), s.size()); }
    } wipe_decoded{*decoded};
    const auto colon = decoded->find(':');
    if (colon == std::string::npos) return verdict{};
    std::string user = decoded->substr(0, colon);
    std::string password = decoded->substr(colon + 1);
    wipe wipe_password{password};
    if (password.find('\0') != std::string::npos) return verdict{};
    const auto it = impl_->users.find(user);

    const std::string key = impl_->digest(user, password);
    {
        std::lock_guard lock(impl_->mutex);
        if (impl_->right.contains(key)) return verdict{user};
        if (impl_->wrong.contains(key)) return verdict{};
    }
    // Milliseconds for bcrypt, once per credential. An unknown user costs as much (a known
    // user's bcrypt hash, when there is one, is computed and ignored), so timing does not
    // tell a bcrypt user's name apart.
    const bool known = it != impl_->users.end();
    const entry& against = known ? it->second : *impl_->decoy;
    if (!may_hash && against.kind == scheme::libcrypt) return std::nullopt;
    const bool ok = verify(against, password) && known;
    std::lock_guard lock(impl_->mutex);
    auto& memory = ok ? impl_->right : impl_->wrong;
    if (memory.size() >= remembered) memory.clear();
    memory.insert(key);
    if (!ok) return verdict{};
    return verdict{std::move(user)};
}

}  // namespace politeproxy
