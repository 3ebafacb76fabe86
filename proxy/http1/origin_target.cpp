#include "politeproxy/http1/origin_target.hpp"

#include "politeproxy/base/char_class.hpp"
#include "politeproxy/policy/host_key.hpp"

#include <boost/url/parse.hpp>

#include <array>
#include <charconv>

namespace politeproxy {

namespace {

constexpr std::string_view http_prefix = "http://";
constexpr std::uint16_t default_http_port = 80;

// Characters a path or query may hold as they are (RFC 3986 section 3.3 and 3.4:
// unreserved, sub-delims, ':', '@', '/', '?'); '%' only with two hex digits after it.
constexpr std::array<bool, 256> plain_path_chars = [] {
    std::array<bool, 256> ok{};
    for (unsigned char c = 'a'; c <= 'z'; ++c) ok[c] = true;
    for (unsigned char c = 'A'; c <= 'Z'; ++c) ok[c] = true;
    for (unsigned char c = '0'; c <= '9'; ++c) ok[c] = true;
    for (unsigned char c : std::string_view("-._~!$&'()*+,;=:@/?")) ok[c] = true;
    return ok;
}();

bool plain_path(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (plain_path_chars[c]) continue;
        if (c != '%' || i + 2 >= s.size() || hex_value(static_cast<unsigned char>(s[i + 1])) < 0 ||
            hex_value(static_cast<unsigned char>(s[i + 2])) < 0) return false;
        i += 2;
    }
    return true;
}

void set_path(origin_target& t, std::string_view path_and_query) {
    t.no_path = path_and_query.empty();
    if (!path_and_query.starts_with('/')) t.path = "/";  // "http://a" or "http://a?q"
    t.path += path_and_query;
}

constexpr target_error bad_host_error{errc::bad_host, "request target has no valid host name, address or port"};

// An authority's host and port text: "[v6]" or "[v6]:port", "host" or "host:port".
struct authority_parts {
    std::string_view host;
    std::optional<std::string_view> port;
};

std::optional<authority_parts> split_authority(std::string_view authority) {
    if (authority.starts_with('[')) {
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        const std::string_view after = authority.substr(close + 1);
        if (!after.empty() && !after.starts_with(':')) return std::nullopt;
        return authority_parts{authority.substr(0, close + 1),
                               after.empty() ? std::nullopt : std::optional(after.substr(1))};
    }
    const std::size_t colon = authority.rfind(':');
    if (colon == std::string_view::npos) return authority_parts{authority, std::nullopt};
    return authority_parts{authority.substr(0, colon), authority.substr(colon + 1)};
}

// A host as an authority writes it: an IPv6 literal in brackets, or what read_host
// takes without brackets.
std::optional<named_host> read_authority_host(std::string_view host) {
    const bool bracketed = host.starts_with('[');
    if (bracketed != (host.find(':') != std::string_view::npos)) return std::nullopt;  // IPv6 and only IPv6 in brackets
    return read_host(host);
}

}  // namespace

std::variant<origin_target, target_error> parse_intercepted_target(std::string_view target,
                                                                   std::string_view host_field, bool is_options,
                                                                   const connect_target& tunnel,
                                                                   std::string_view expected_key,
                                                                   wire_allocator arena) {
    std::string_view authority = host_field;
    std::string_view path_and_query = target;
    if (target.starts_with("https://")) {
        const std::string_view rest = target.substr(8);
        const std::size_t end = rest.find_first_of("/?");
        authority = rest.substr(0, end);
        path_and_query = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    } else if (target == "*" && is_options) {
        path_and_query = {};
    } else if (!target.starts_with('/')) {
        return target_error{errc::bad_request, "a request inside TLS needs an origin-form or https:// target"};
    }
    if (!plain_path(path_and_query))  // RFC 3986 characters and valid %-escapes only, as absolute-form
        return target_error{errc::bad_request, "request target is not a valid path and query"};
    const auto parts = split_authority(authority);
    const auto named = parts ? read_authority_host(parts->host) : std::nullopt;
    const auto port = parts && parts->port ? parse_port(*parts->port) : std::optional<std::uint16_t>(443);
    if (!named || !port || named->key != expected_key || *port != tunnel.port)
        return target_error{errc::misdirected_request, "the request names another origin than this TLS connection's"};
    origin_target t(arena);
    t.key = tunnel.key;
    t.address = tunnel.address;
    t.port = tunnel.port;
    t.tls = true;
    set_path(t, path_and_query);
    return t;
}

std::optional<std::uint16_t> parse_port(std::string_view digits) {
    unsigned port = 0;
    if (digits.empty() || digits.size() > 5) return std::nullopt;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535)
        return std::nullopt;
    return static_cast<std::uint16_t>(port);
}

void origin_target::append_host(std::string& out) const {
    const bool ipv6 = key.find(':') != std::string::npos;
    if (ipv6) out += '[';
    out += key;
    if (ipv6) out += ']';
    if (port != (tls ? 443 : default_http_port)) {
        char digits[8];
        out += ':';
        out.append(digits, std::to_chars(digits, digits + sizeof digits, port).ptr);
    }
}

namespace detail {

std::optional<origin_target> parse_plain_target(std::string_view target, wire_allocator arena) {
    if (!target.starts_with(http_prefix)) return std::nullopt;
    const std::string_view rest = target.substr(http_prefix.size());
    const std::size_t authority_end = std::min(rest.find('/'), rest.find('?'));
    const std::string_view authority = rest.substr(0, authority_end);
    const std::string_view path_and_query = authority_end == std::string_view::npos ? "" : rest.substr(authority_end);
    const std::size_t colon = authority.find(':');
    const std::string_view host = authority.substr(0, colon);
    std::uint16_t port = default_http_port;
    if (colon != std::string_view::npos) {
        const auto parsed = parse_port(authority.substr(colon + 1));
        if (!parsed) return std::nullopt;
        port = *parsed;
    }
    // Letters, digits, '-', '_' and dots between labels, or numeric forms of IPv4
    // addresses (the full parse reads them the same way).
    if (host.starts_with('[') || !plain_path(path_and_query)) return std::nullopt;  // brackets: the full parse
    auto named = read_host(host);
    if (!named) return std::nullopt;
    origin_target t(arena);
    t.key = std::move(named->key);
    t.address = named->address;
    t.port = port;
    set_path(t, path_and_query);
    return t;
}

std::variant<origin_target, target_error> parse_any_target(std::string_view target, wire_allocator arena) {
    if (target.starts_with("/") || target == "*")
        return target_error{errc::origin_form_request, "this is a proxy: send absolute-form requests (http://host/path)"};
    // Boost.URL checks the syntax and the scheme; the authority is read here, as
    // CONNECT's is (Boost.URL 1.81 reads "http://1.2.3.4.evil.test/x" as host 1.2.3.4
    // and path ".evil.test/x").
    const auto parsed = boost::urls::parse_absolute_uri(target);
    if (!parsed) return target_error{errc::bad_request, "request target is not an absolute URI"};
    if (parsed->scheme_id() != boost::urls::scheme::http)
        return target_error{errc::unsupported_scheme, "only http:// is forwarded; use CONNECT for https"};
    if (!target.substr(4).starts_with("://")) return target_error{errc::bad_request, "request target has no authority"};
    const std::string_view rest = target.substr(7);
    const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
    if (authority.find('@') != std::string_view::npos)
        return target_error{errc::bad_request, "request target carries userinfo"};
    const auto parts = split_authority(authority);
    auto named = parts ? read_authority_host(parts->host) : std::nullopt;
    if (!named) return bad_host_error;
    origin_target t(arena);
    if (parts->port) {
        const auto port = parse_port(*parts->port);
        if (!port) return bad_host_error;
        t.port = *port;
    }
    t.key = std::move(named->key);
    t.address = named->address;
    set_path(t, rest.substr(authority.size()));
    return t;
}

}  // namespace detail

std::variant<origin_target, target_error> parse_origin_target(std::string_view target, wire_allocator arena) {
    if (auto plain = detail::parse_plain_target(target, arena)) return std::move(*plain);
    return detail::parse_any_target(target, arena);
}

std::variant<connect_target, target_error> parse_connect_target(std::string_view authority) {
    constexpr target_error bad{errc::bad_request, "CONNECT needs host:port, the port 1 to 65535"};
    const auto parts = split_authority(authority);
    if (!parts || !parts->port) return bad;
    const auto port = parse_port(*parts->port);
    if (!port) return bad;
    auto named = read_authority_host(parts->host);
    if (!named) return target_error{errc::bad_host, "CONNECT target has no valid host name or address"};
    return connect_target{std::move(named->key), named->address, *port};
}

}  // namespace politeproxy
