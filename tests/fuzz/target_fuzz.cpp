// Request targets (absolute-form, and inside intercepted TLS) and CONNECT authorities,
// and the host keys made from them.
// Invariants: a key is canonical (host_key is idempotent on it) and has no byte a
// gate name or metric label should not; the hand-read common case agrees with the full
// parse wherever it answers; an accepted CONNECT port is 1 to 65535.
#include "fuzz_input.hpp"

#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/http1/origin_target.hpp"

#include <memory_resource>
#include <string>
#include <variant>

using namespace politeproxy;

namespace {

void require_clean_key(const std::string& key) {
    fuzz::require(!key.empty(), "empty host key");
    fuzz::require(host_key(key) == key, "host key not canonical");
    for (char c : key)
        fuzz::require((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == ':',
                      "host key with a byte outside [a-z0-9-_.:]");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = fuzz::text(data, size);
    std::pmr::monotonic_buffer_resource arena;
    const auto any = detail::parse_any_target(input, wire_allocator{&arena});
    if (const auto plain = detail::parse_plain_target(input, wire_allocator{&arena})) {
        require_clean_key(plain->key);
        const auto* full = std::get_if<origin_target>(&any);
        fuzz::require(full != nullptr, "the full parse refuses what the hand-read path takes");
        fuzz::require(full->key == plain->key && full->port == plain->port && full->path == plain->path &&
                          full->no_path == plain->no_path,
                      "the two parses disagree");
    }
    if (const auto* t = std::get_if<origin_target>(&any)) {
        require_clean_key(t->key);
        fuzz::require(t->port != 0, "port 0 accepted");
    }
    const auto c = parse_connect_target(input);
    if (const auto* t = std::get_if<connect_target>(&c)) {
        require_clean_key(t->key);
        fuzz::require(t->port != 0, "CONNECT port 0 accepted");
    }
    // Inside intercepted TLS: the input split at its first newline into a target and a
    // Host field; whatever is accepted goes to the tunnel's origin, over TLS, and names it.
    {
        const auto nl = input.find('\n');
        const std::string_view target = input.substr(0, nl);
        const std::string_view host = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
        connect_target tunnel{"tls.test", std::nullopt, 8443};
        const bool options = size > 0 && (data[0] & 1);
        const auto in_tls = parse_intercepted_target(target, host, options, tunnel, "tls.test", wire_allocator{&arena});
        if (const auto* t = std::get_if<origin_target>(&in_tls)) {
            fuzz::require(!t->path.empty() && t->path.front() == '/', "an intercepted path not in origin form");
            if (target.starts_with('/'))
                fuzz::require(t->path == target, "an origin-form path not forwarded as it came");
            // It named the connection's host: the authority it read says tls.test.
            const std::string_view authority = target.starts_with("https://")
                                                   ? target.substr(8, target.substr(8).find_first_of("/?"))
                                                   : host;
            const auto colon = authority.rfind(':');
            const auto named = read_host(authority.substr(0, colon));
            fuzz::require(named && named->key == "tls.test", "accepted without naming the connection's host");
        }
    }
    if (valid_host_name(input)) require_clean_key(host_key(input));
    if (const auto address = parse_host_address(input))
        fuzz::require(parse_host_address(address_text(*address)) == address, "address text does not read back");
    return 0;
}
