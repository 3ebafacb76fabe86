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

}  // namespace politeproxy::forwarding
