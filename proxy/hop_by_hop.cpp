#include "politeproxy/hop_by_hop.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include <string>
#include <vector>

namespace politeproxy {
namespace http = boost::beast::http;

void strip_hop_by_hop(http::fields& fields) {
    std::vector<std::string> named;
    for (const auto& f : fields)
        if (f.name() == http::field::connection)
            for (auto token : http::token_list{f.value()}) named.emplace_back(token);
    for (const auto& name : named) {
        const auto f = http::string_to_field(name);
        if (f == http::field::content_length || f == http::field::transfer_encoding) continue;
        fields.erase(name);
    }
    for (auto f : {http::field::connection, http::field::proxy_connection, http::field::keep_alive,
                   http::field::te, http::field::upgrade, http::field::proxy_authorization,
                   http::field::proxy_authenticate})
        fields.erase(f);
}

bool via_contains(const http::fields& fields, std::string_view via) {
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
