#pragma once
// What both HTTP/2 sessions (server_session towards clients, client_session towards
// origins) do alike with nghttp2: a stream's outgoing body waiting for the peer's
// flow-control window, header fields as nghttp2 takes them, and the frames to send.
// Private to proxy/http2/.
#include "politeproxy/http2/server_session.hpp"

#include <boost/container/small_vector.hpp>
#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy::http2::detail {

/// A body (request or response) waiting for the peer's flow-control window.
struct outgoing_body {
    std::string bytes;
    std::size_t sent = 0;   ///< of `bytes`, already framed
    bool end = false;       ///< no more after `bytes`
    bool deferred = false;  ///< nghttp2 was told to wait for more: resume on append()
    std::vector<field> trailers;  ///< sent after the last DATA, which then does not end the stream

    /// Queues `data` (and the end, with `trailer_fields` if any); true when nghttp2 must
    /// be told to resume the stream.
    bool append(std::span<const std::uint8_t> data, bool last, std::span<const field> trailer_fields = {});
    std::size_t queued() const { return bytes.size() - sent; }
    /// nghttp2's data-source read for `stream`: up to `length` bytes into `buf`, EOF at
    /// the end (the trailers submitted then), NGHTTP2_ERR_DEFERRED when nothing is queued yet.
    ssize_t frame(nghttp2_session* session, std::int32_t stream, std::uint8_t* buf, std::size_t length,
                  std::uint32_t* flags);
};

inline std::string_view view(const std::uint8_t* p, std::size_t n) { return {reinterpret_cast<const char*>(p), n}; }

inline nghttp2_nv name_value(std::string_view n, std::string_view v) {
    return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(n.data())),
                      reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE};
}

/// A header block as nghttp2 takes it (nghttp2 copies what it keeps): on the stack for
/// the usual number of fields, no allocation.
using name_values = boost::container::small_vector<nghttp2_nv, 32>;

/// Appends what nghttp2 has to send now; returns how many bytes.
std::size_t drain(nghttp2_session* session, std::string& out);

/// The callbacks a session is made with (on_frame_send may be null).
struct session_callbacks {
    nghttp2_on_begin_headers_callback on_begin_headers;
    nghttp2_on_header_callback on_header;
    nghttp2_on_frame_recv_callback on_frame_recv;
    nghttp2_on_data_chunk_recv_callback on_data_chunk;
    nghttp2_on_stream_close_callback on_stream_close;
    nghttp2_on_frame_send_callback on_frame_send = nullptr;
};

enum class side { client, server };

/// The connection-level receive window each session opens (streams keep 64 KiB each).
inline constexpr std::int32_t connection_window = 16 * 1024 * 1024;

/// A new nghttp2 session for `user` that sends no WINDOW_UPDATE by itself (the window
/// opens as the owner reports bodies consumed), with `settings` submitted. Throws when
/// nghttp2 cannot make one.
nghttp2_session* new_session(side s, const session_callbacks& callbacks, void* user,
                             std::span<const nghttp2_settings_entry> settings);

/// RFC 9113 section 6.5.2's size of a field: its name, its value and 32.
constexpr std::size_t field_size(std::size_t name, std::size_t value) { return name + value + 32; }

}  // namespace politeproxy::http2::detail
