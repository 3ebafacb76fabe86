#include "politeproxy/hop_by_hop.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include <boost/container/small_vector.hpp>

namespace politeproxy {
namespace http = boost::beast::http;

void strip_hop_by_hop(wire_fields& fields) {
    // Views into the Connection fields, which stay put until the last loop below:
    // erasing other fields does not move them, and Connection itself goes last.
    boost::container::small_vector<std::string_view, 8> named;
    for (const auto& f : fields)
        if (f.name() == http::field::connection)
            for (auto token : http::token_list{f.value()}) named.emplace_back(token);
    for (const auto name : named) {
        const auto f = http::string_to_field(name);
        if (f == http::field::content_length || f == http::field::transfer_encoding || f == http::field::connection)
            continue;
        fields.erase(name);
    }
    for (auto f : {http::field::connection, http::field::proxy_connection, http::field::keep_alive,
                   http::field::te, http::field::upgrade, http::field::proxy_authorization,
                   http::field::proxy_authenticate})
        fields.erase(f);
}

bool via_contains(const wire_fields& fields, std::string_view via) {
    // Via entries are "protocol pseudonym [comment]", comma separated.
    for (const auto& f : fields) {
        if (f.name() != http::field::via) continue;
        const std::string_view value = f.value();
        for (std::size_t pos = value.find(via); pos != std::string_view::npos; pos = value.find(via, pos + 1)) {
            const std::size_t end = pos + via.size();
            const bool starts = pos == 0 || value[pos - 1] == ' ' || value[pos - 1] == ',';
            const bool ends = end == value.size() || value[end] == ' ' || value[end] == ',';
            if (starts && ends) return true;
        }
    }
    return false;
}

}  // namespace politeproxy
