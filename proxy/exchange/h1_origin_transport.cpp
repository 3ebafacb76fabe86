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

}  // namespace politeproxy::forwarding
