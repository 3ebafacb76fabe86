#include "politeproxy/policy/admin_tokens.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace politeproxy {
namespace {

bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

bool token_char(char c) { return c > 0x20 && c < 0x7f; }  // printable, not a space

bool blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
}

std::string at_line(std::size_t line, const std::string& what) { return "line " + std::to_string(line) + ": " + what; }

}  // namespace

admin_tokens::digest admin_tokens::sha256(std::string_view token) {
    digest out{};
    unsigned int size = 0;
    if (EVP_Digest(token.data(), token.size(), out.data(), &size, EVP_sha256(), nullptr) != 1 || size != out.size())
        throw std::runtime_error("SHA-256 failed (OpenSSL)");  // a broken libcrypto: a bug, not an input
    return out;
}

std::variant<admin_tokens, std::string> admin_tokens::parse(std::string_view text) {
    admin_tokens tokens;
    std::vector<std::size_t> lines;  // where each entry was given, for "first on line N"
    std::size_t number = 0;
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        ++number;
        if (line.ends_with('\r')) line.remove_suffix(1);
        const auto first = line.find_first_not_of(" \t");
        if (blank(line) || line[first] == '#') continue;

        const auto colon = line.find(':');
        if (colon == std::string_view::npos) return at_line(number, "expected NAME:TOKEN");
        const std::string_view name = line.substr(0, colon), token = line.substr(colon + 1);
        if (name.empty() || !std::all_of(name.begin(), name.end(), name_char))
            return at_line(number, "the name must be letters, digits, '-', '_' or '.'");
        if (token.size() < min_token_bytes || !std::all_of(token.begin(), token.end(), token_char))
            return at_line(number, "the token of " + std::string(name) + " must be at least " +
                                       std::to_string(min_token_bytes) + " printable characters without spaces");
        entry e{std::string(name), sha256(token)};
        for (std::size_t i = 0; i < tokens.entries_.size(); ++i) {
            if (tokens.entries_[i].name == e.name)
                return at_line(number, "the name " + e.name + " is given twice (first on line " +
                                           std::to_string(lines[i]) + ")");
            // Two names for one token: the log could not say who acted.
            if (tokens.entries_[i].token_digest == e.token_digest)
                return at_line(number, "the token of " + e.name + " is the token of " + tokens.entries_[i].name +
                                           " (line " + std::to_string(lines[i]) + ")");
        }
        tokens.entries_.push_back(std::move(e));
        lines.push_back(number);
    }
    if (tokens.entries_.empty()) return std::string("no tokens: expected lines NAME:TOKEN");
    return tokens;
}

std::optional<std::string> admin_tokens::name_for(std::string_view authorization) const {
    constexpr std::string_view scheme = "bearer";
    const auto start = authorization.find_first_not_of(" \t");
    if (start == std::string_view::npos) return std::nullopt;
    authorization.remove_prefix(start);
    if (authorization.size() <= scheme.size() ||
        !std::equal(scheme.begin(), scheme.end(), authorization.begin(),
                    [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }) ||
        (authorization[scheme.size()] != ' ' && authorization[scheme.size()] != '\t'))
        return std::nullopt;
    std::string_view token = authorization.substr(scheme.size());
    token.remove_prefix(std::min(token.find_first_not_of(" \t"), token.size()));
    token = token.substr(0, token.find_last_not_of(" \t") + 1);
    if (token.empty()) return std::nullopt;

    const digest presented = sha256(token);
    const entry* found = nullptr;
    // Every entry, whatever matched: the time taken says nothing about which one did.
    for (const auto& e : entries_)
        if (CRYPTO_memcmp(presented.data(), e.token_digest.data(), presented.size()) == 0) found = &e;
    if (!found) return std::nullopt;
    return found->name;
}

}  // namespace politeproxy
