#include "session_parts.hpp"

#include <algorithm>
#include <cstring>

namespace politeproxy::http2::detail {

bool outgoing_body::append(std::span<const std::uint8_t> data, bool last) {
    bytes.append(reinterpret_cast<const char*>(data.data()), data.size());
    end = end || last;
    const bool resume = deferred;
    deferred = false;
    return resume;
}

ssize_t outgoing_body::frame(std::uint8_t* buf, std::size_t length, std::uint32_t* flags) {
    const std::size_t n = std::min(length, queued());
    std::memcpy(buf, bytes.data() + sent, n);
    sent += n;
    if (sent == bytes.size()) {  // what was framed is dropped, not kept to the end
        bytes.clear();
        sent = 0;
        if (end) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return static_cast<ssize_t>(n);
        }
    }
    if (n == 0) {
        deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
}

std::size_t drain(nghttp2_session* session, std::string& out) {
    std::size_t total = 0;
    for (;;) {
        const std::uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(session, &data);
        if (n <= 0) break;
        out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
        total += static_cast<std::size_t>(n);
    }
    return total;
}

}  // namespace politeproxy::http2::detail
