#include "politeproxy/exchange/forward_to_origin.hpp"

#include <charconv>

namespace politeproxy::forwarding {

void pool_key_of(const origin_target& target, std::string& out) {
    out.assign(target.tls ? "https:" : "");
    out += target.key;
    out += ':';
    char port_digits[8];
    out.append(port_digits, std::to_chars(port_digits, port_digits + sizeof port_digits, target.port).ptr);
}

void pool_key_through(const parent_state& parent, const origin_target& target, std::string_view pinned,
                      std::string& out) {
    if (!target.tls) {
        out = parent.pool_key();
        return;
    }
    pool_key_of(target, out);
    if (!pinned.empty()) (out += '@') += pinned;
    (out += " via ") += parent.pool_key();
}

}  // namespace politeproxy::forwarding
