#include "politeproxy/origin_target.hpp"

#include "politeproxy/host_key.hpp"

#include <boost/url/parse.hpp>

#include <array>
#include <charconv>

namespace politeproxy {
namespace detail {

namespace {

constexpr std::string_view http_prefix = "http://";

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

bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool plain_path(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (plain_path_chars[c]) continue;
        if (c != '%' || i + 2 >= s.size() || !hex_digit(s[i + 1]) || !hex_digit(s[i + 2])) return false;
        i += 2;
    }
    return true;
}

void set_path(origin_target& t, std::string_view path_and_query) {
    if (!path_and_query.starts_with('/')) t.path = "/";  // "http://a" or "http://a?q"
    t.path += path_and_query;
}

}  // namespace

std::optional<origin_target> parse_plain_target(std::string_view target, wire_allocator arena) {
    if (!target.starts_with(http_prefix)) return std::nullopt;
    const std::string_view rest = target.substr(http_prefix.size());
    const std::size_t authority_end = std::min(rest.find('/'), rest.find('?'));
    const std::string_view authority = rest.substr(0, authority_end);
    const std::string_view path_and_query = authority_end == std::string_view::npos ? "" : rest.substr(authority_end);
    const std::size_t colon = authority.find(':');
    const std::string_view host = authority.substr(0, colon);
    std::uint16_t port = 80;
    if (colon != std::string_view::npos) {
        const std::string_view digits = authority.substr(colon + 1);
        if (digits.empty() || digits.size() > 5 || digits.front() == '0') return std::nullopt;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
        if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    }
    // valid_host_name allows letters, digits, '-', '_' and dots between labels, and
    // reads a dotted quad as a name (the full parse calls it an address: same result).
    if (!valid_host_name(host) || !plain_path(path_and_query)) return std::nullopt;
    origin_target t(arena);
    t.host = host;
    t.port = port;
    t.host_header = authority;
    set_path(t, path_and_query);
    return t;
}

std::variant<origin_target, target_error> parse_any_target(std::string_view target, wire_allocator arena) {
    if (target.starts_with("/") || target == "*")
        return target_error{errc::origin_form_request, "this is a proxy: send absolute-form requests (http://host/path)"};
    const auto parsed = boost::urls::parse_absolute_uri(target);
    if (!parsed) return target_error{errc::bad_request, "request target is not an absolute URI"};
    const boost::urls::url_view url = *parsed;
    if (url.scheme_id() != boost::urls::scheme::http)
        return target_error{errc::unsupported_scheme, "only http:// is forwarded; use CONNECT for https"};
    origin_target t(arena);
    url.host_address(boost::urls::string_token::assign_to(t.host));
    t.port = url.has_port() ? url.port_number() : 80;
    const auto type = url.host_type();
    const bool literal = type == boost::urls::host_type::ipv4 || type == boost::urls::host_type::ipv6;
    if (t.port == 0 || (!literal && (type != boost::urls::host_type::name || !valid_host_name(url.encoded_host()))))
        return target_error{errc::bad_host, "request target has no valid host name, address or port"};
    t.host_header = url.encoded_host_and_port();
    set_path(t, url.encoded_target());
    return t;
}

}  // namespace detail

std::variant<origin_target, target_error> parse_origin_target(std::string_view target, wire_allocator arena) {
    if (auto plain = detail::parse_plain_target(target, arena)) return std::move(*plain);
    return detail::parse_any_target(target, arena);
}

}  // namespace politeproxy
