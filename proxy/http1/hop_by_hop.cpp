#include "politeproxy/http1/hop_by_hop.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>

namespace politeproxy {
namespace beast = boost::beast;
namespace http = beast::http;

bool always_hop_by_hop(http::field f) {
    switch (f) {
    case http::field::connection:
    case http::field::proxy_connection:
    case http::field::keep_alive:
    case http::field::te:
    case http::field::upgrade:
    case http::field::proxy_authorization:
    case http::field::proxy_authenticate: return true;
    default: return false;
    }
}

bool removed_when_listed(http::field listed) {
    return listed != http::field::content_length && listed != http::field::transfer_encoding &&
           !always_hop_by_hop(listed);
}

void strip_hop_by_hop(wire_fields& fields) {
    // The names Connection lists beyond the fixed set (usually only "close", or none):
    // views into its value, which stays where it is until the Connection fields go,
    // after the pass below.
    boost::container::small_vector<std::string_view, 8> named;
    boost::container::small_vector<wire_fields::const_iterator, 2> connection;
    for (auto it = fields.begin(); it != fields.end(); ++it) {
        if (it->name() != http::field::connection) continue;
        connection.push_back(it);
        for (auto token : http::token_list{it->value()}) {
            if (removed_when_listed(http::string_to_field(token))) named.push_back(token);
        }
    }
    // One pass: a field goes when its name is one of the fixed set (compared as an
    // enum) or one Connection listed.
    const auto listed = [&](std::string_view name) {
        return std::any_of(named.begin(), named.end(), [&](std::string_view n) { return beast::iequals(n, name); });
    };
    for (auto it = fields.begin(); it != fields.end();) {
        const http::field name = it->name();
        if (name != http::field::connection && (always_hop_by_hop(name) || (!named.empty() && listed(it->name_string()))))
            it = fields.erase(it);
        else
            ++it;
    }
    for (auto it : connection) fields.erase(it);
}

bool via_contains(const wire_fields& fields, std::string_view via) {
    for (const auto& f : fields)
        if (f.name() == http::field::via && via_value_contains(f.value(), via)) return true;
    return false;
}

bool via_value_contains(std::string_view value, std::string_view via) {
    // Via entries are "protocol pseudonym [comment]", comma separated.
    for (std::size_t pos = value.find(via); pos != std::string_view::npos; pos = value.find(via, pos + 1)) {
        const std::size_t end = pos + via.size();
        const bool starts = pos == 0 || value[pos - 1] == ' ' || value[pos - 1] == ',';
        const bool ends = end == value.size() || value[end] == ' ' || value[end] == ',';
        if (starts && ends) return true;
    }
    return false;
}

}  // namespace politeproxy
