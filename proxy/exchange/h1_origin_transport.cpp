#include "politeproxy/exchange/h1_origin_transport.hpp"

#include <algorithm>
#include <charconv>

namespace politeproxy::forwarding {

clock::duration pooled_lifetime(std::string_view hint, clock::duration idle) {
    clock::duration lifetime = std::chrono::seconds(4);
    if (const auto pos = hint.find("timeout="); pos != std::string_view::npos) {
        unsigned seconds = 0;
        const char* first = hint.data() + pos + 8;
        if (auto [end, ec] = std::from_chars(first, hint.data() + hint.size(), seconds); ec == std::errc{})
            lifetime = std::chrono::seconds(seconds > 1 ? seconds - 1 : 0);
    }
    return std::min(lifetime, idle);
}

void readdress_to_parent(std::string& head, const origin_target& target, std::string_view authorization) {
    const std::size_t target_at = head.find(' ') + 1;
    std::string absolute = target.tls ? "https://" : "http://";
    target.append_host(absolute);
    if (head.compare(target_at, 2, "* ") == 0)
        head.replace(target_at, 1, absolute);
    else
        head.insert(target_at, absolute);
    if (authorization.empty()) return;
    std::string line = "Proxy-Authorization: ";
    (line += authorization) += "\r\n";
    head.insert(head.size() - 2, line);
}

}  // namespace politeproxy::forwarding
