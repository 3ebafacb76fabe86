#include "politeproxy/host_key.hpp"

namespace politeproxy {

std::string host_key(std::string_view host) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    while (!host.empty() && host.back() == '.') host.remove_suffix(1);
    std::string key(host);
    for (char& c : key)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return key;
}

bool valid_host_name(std::string_view host) {
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    if (host.empty() || host.size() > 253) return false;
    std::size_t label = 0;
    for (char c : host) {
        if (c == '.') {
            if (label == 0) return false;
            label = 0;
            continue;
        }
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
        if (!ok || ++label > 63) return false;
    }
    return label > 0;
}

bool host_matches(std::string_view pattern, std::string_view host) {
    if (pattern.starts_with("*.")) {
        const std::string_view suffix = pattern.substr(1);  // ".example.com"
        return host.size() > suffix.size() && host.ends_with(suffix);
    }
    return pattern == host;
}

}  // namespace politeproxy
