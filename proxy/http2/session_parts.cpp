#include "session_parts.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

namespace politeproxy::http2::detail {

bool outgoing_body::append(std::span<const std::uint8_t> data, bool last, std::span<const field> trailer_fields) {
    bytes.append(reinterpret_cast<const char*>(data.data()), data.size());
    end = end || last;
    if (last) trailers.assign(trailer_fields.begin(), trailer_fields.end());
    const bool resume = deferred;
    deferred = false;
    return resume;
}

ssize_t outgoing_body::frame(nghttp2_session* session, std::int32_t stream, std::uint8_t* buf, std::size_t length,
                             std::uint32_t* flags) {
    const std::size_t n = std::min(length, queued());
    std::memcpy(buf, bytes.data() + sent, n);
    sent += n;
    if (sent == bytes.size()) {  // what was framed is dropped, not kept to the end
        bytes.clear();
        sent = 0;
        if (end) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            if (!trailers.empty()) {  // the stream ends with them (nghttp2 copies the fields)
                name_values nva;
                for (const field& f : trailers) nva.push_back(name_value(f.name, f.value));
                if (nghttp2_submit_trailer(session, stream, nva.data(), nva.size()) == 0)
                    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
                trailers.clear();
            }
            return static_cast<ssize_t>(n);
        }
    }
    if (n == 0) {
        deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
}

nghttp2_session* new_session(side s, const session_callbacks& callbacks, void* user,
                             std::span<const nghttp2_settings_entry> settings) {
    nghttp2_session_callbacks* cb = nullptr;
    if (nghttp2_session_callbacks_new(&cb) != 0) throw std::bad_alloc();
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, callbacks.on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, callbacks.on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, callbacks.on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, callbacks.on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, callbacks.on_stream_close);
    if (callbacks.on_frame_send) nghttp2_session_callbacks_set_on_frame_send_callback(cb, callbacks.on_frame_send);
    nghttp2_option* opt = nullptr;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        throw std::bad_alloc();
    }
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_session* session = nullptr;
    const int rv = s == side::server ? nghttp2_session_server_new2(&session, cb, user, opt)
                                     : nghttp2_session_client_new2(&session, cb, user, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0) throw std::runtime_error(std::string("nghttp2: ") + nghttp2_strerror(rv));
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    // Each stream keeps the default 64 KiB window (its backpressure); the connection's
    // is large enough that one stream whose reader is slow cannot hold up the others.
    nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, connection_window);
    return session;
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
