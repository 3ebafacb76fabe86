#include "politeproxy/server/client_identity.hpp"

#include "politeproxy/base/char_class.hpp"

#include <algorithm>

namespace politeproxy {

namespace {

constexpr std::size_t max_name_bytes = 64;

bool name_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return is_tchar(u) || c == ':' || c == '/' || c == '@' || c == '=';
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && is_ows(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && is_ows(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

}  // namespace

std::string client_name(const clients_config& c, const client_facts& facts) {
    switch (c.identify_by) {
    case clients_config::identity::user:
        if (!facts.user.empty()) return std::string(facts.user);
        break;
    case clients_config::identity::address:
        if (!facts.peer.empty()) return std::string(facts.peer);
        break;
    case clients_config::identity::header:
        if (facts.header_fields == 1) {
            const auto value = trimmed(facts.header);
            // "_..." is the metrics' (client="_other"): not a name a client may take.
            if (!value.empty() && value.front() != '_' && value.size() <= max_name_bytes &&
                std::all_of(value.begin(), value.end(), name_byte))
                return std::string(value);
        }
        break;
    }
    return std::string(facts.outer.empty() ? anonymous_client : facts.outer);
}

std::string address_text(const boost::asio::ip::address& a) {
    if (a.is_v6() && a.to_v6().is_v4_mapped())
        return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6()).to_string();
    return a.to_string();
}

}  // namespace politeproxy
