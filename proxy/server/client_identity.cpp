#include "politeproxy/server/client_identity.hpp"

#include "politeproxy/base/char_class.hpp"
#include "politeproxy/exchange/client_book.hpp"

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

// The identify_by header's fields of either kind of field set: each value, then erased.
void each_named(const wire_fields& fields, std::string_view name, auto&& f) {
    for (auto [it, end] = fields.equal_range(name); it != end; ++it) f(it->value());
}
void erase_named(wire_fields& fields, std::string_view name) { fields.erase(name); }
void each_named(const std::vector<field>& fields, std::string_view name, auto&& f) {
    for (const auto& x : fields)
        if (x.name == name) f(std::string_view(x.value));
}
void erase_named(std::vector<field>& fields, std::string_view name) {
    std::erase_if(fields, [&](const field& x) { return x.name == name; });
}

template <class Fields>
std::shared_ptr<client_state> identify(client_book& book, const clients_config& c, client_facts facts, Fields& fields,
                                       clock::time_point now) {
    if (c.identify_by == clients_config::identity::header)
        each_named(fields, c.header, [&](std::string_view value) {
            ++facts.header_fields;
            facts.header = value;
        });
    auto who = book.find(client_name(c, facts), now);
    if (facts.header_fields > 0) erase_named(fields, c.header);
    return who;
}

}  // namespace

std::shared_ptr<client_state> identify_client(client_book& book, const clients_config& c, client_facts facts,
                                              wire_fields& fields, clock::time_point now) {
    return identify(book, c, facts, fields, now);
}

std::shared_ptr<client_state> identify_client(client_book& book, const clients_config& c, client_facts facts,
                                              std::vector<field>& fields, clock::time_point now) {
    return identify(book, c, facts, fields, now);
}

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
