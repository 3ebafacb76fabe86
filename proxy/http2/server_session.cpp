#include "politeproxy/http2/server_session.hpp"

#include "politeproxy/policy/token_bucket.hpp"
#include "session_parts.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace politeproxy::http2 {

namespace {

using detail::view;

struct stream_state {
    request_head head;
    std::size_t header_bytes = 0;
    bool oversized = false;  ///< its header block passed the bound (reported once)
    std::vector<field> trailers;  ///< the request's trailer fields
    detail::outgoing_body body;  ///< the response's
};

}  // namespace

struct server_session::impl {
    session_events& events;
    settings limits;
    nghttp2_session* session = nullptr;
    std::unordered_map<std::int32_t, stream_state> streams;
    token_bucket resets;
    clock::time_point now;  ///< of the receive() in progress
    bool calmed = false;

    impl(session_events& e, const settings& s, clock::time_point t)
        : events(e), limits(s), resets(s.resets_per_second, s.reset_burst, t), now(t) {}

    stream_state* find(std::int32_t id) {
        const auto it = streams.find(id);
        return it == streams.end() ? nullptr : &it->second;
    }

    static impl& self(void* user) { return *static_cast<impl*>(user); }

    static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
            request_head& head = self(user).streams[frame->hd.stream_id].head;
            head.stream = frame->hd.stream_id;
            head.fields.reserve(typical_field_count);
        }
        return 0;
    }

    static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                         const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
        auto& me = self(user);
        stream_state* s = me.find(frame->hd.stream_id);
        if (!s) return 0;
        // The header-size bound applies to the decoded block (HPACK can inflate a small
        // frame): past it the stream is reset, the connection goes on.
        s->header_bytes += detail::field_size(namelen, valuelen);
        if (s->header_bytes > me.limits.max_header_bytes) {
            if (!std::exchange(s->oversized, true)) me.events.on_guard(guard::header_size);
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        const auto n = view(name, namelen);
        const auto v = view(value, valuelen);
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {  // trailers (nghttp2 refused pseudo-header fields)
            s->trailers.push_back(field{std::string(n), std::string(v)});
            return 0;
        }
        request_head& h = s->head;
        if (n == ":method") h.method = v;
        else if (n == ":scheme") h.scheme = v;
        else if (n == ":authority") h.authority = v;
        else if (n == ":path") h.path = v;
        else h.fields.push_back(field{std::string(n), std::string(v)});
        return 0;
    }

    static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
        auto& me = self(user);
        if (frame->hd.type == NGHTTP2_RST_STREAM && !me.calmed && !me.resets.try_take(me.now)) {
            me.calmed = true;
            nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM);
            me.events.on_guard(guard::rapid_reset);
        }
        const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
        stream_state* s = me.find(frame->hd.stream_id);
        if (!s) return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
            s->head.end_stream = end_stream;
            me.events.on_request(std::move(s->head));
            s->head = request_head{};
            return 0;
        }
        if (frame->hd.type == NGHTTP2_HEADERS && end_stream && !s->trailers.empty())
            me.events.on_trailers(frame->hd.stream_id, std::move(s->trailers));
        if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) && end_stream)
            me.events.on_body_end(frame->hd.stream_id);
        return 0;
    }

    static int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t stream, const std::uint8_t* data,
                             std::size_t len, void* user) {
        auto& me = self(user);
        if (me.find(stream)) me.events.on_body(stream, {data, len});
        else nghttp2_session_consume(session, stream, len);  // nobody forwards it: the window must not shrink
        return 0;
    }

    static int on_stream_close(nghttp2_session*, std::int32_t stream, std::uint32_t error_code, void* user) {
        auto& me = self(user);
        if (me.streams.erase(stream) > 0) me.events.on_stream_closed(stream, error_code);
        return 0;
    }

    // nghttp2 refuses a stream beyond SETTINGS_MAX_CONCURRENT_STREAMS with REFUSED_STREAM
    // on its own (the owner never resets with that code).
    static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
        if (frame->hd.type == NGHTTP2_RST_STREAM && frame->rst_stream.error_code == NGHTTP2_REFUSED_STREAM)
            self(user).events.on_guard(guard::too_many_streams);
        return 0;
    }

    static ssize_t read_body(nghttp2_session* session, std::int32_t stream, std::uint8_t* buf, std::size_t length,
                             std::uint32_t* flags, nghttp2_data_source*, void* user) {
        stream_state* s = self(user).find(stream);
        if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        return s->body.frame(session, stream, buf, length, flags);
    }
};

server_session::server_session(session_events& events, const settings& s, clock::time_point now)
    : impl_(std::make_unique<impl>(events, s, now)) {
    const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s.max_concurrent_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(s.max_header_bytes)},
    };
    const detail::session_callbacks callbacks{&impl::on_begin_headers, &impl::on_header, &impl::on_frame_recv, &impl::on_data_chunk,
                                                   &impl::on_stream_close, &impl::on_frame_send};
    impl_->session = detail::new_session(detail::side::server, callbacks, impl_.get(), iv);
}

server_session::~server_session() { nghttp2_session_del(impl_->session); }

bool server_session::receive(std::span<const std::uint8_t> bytes, clock::time_point now) {
    impl_->now = now;
    const ssize_t rv = nghttp2_session_mem_recv(impl_->session, bytes.data(), bytes.size());
    // A connection error nghttp2 answered itself queues a GOAWAY; the session stops wanting
    // to read once it is sent (alive() turns false then: the owner closes).
    if (rv >= 0) return !impl_->calmed && nghttp2_session_want_read(impl_->session) != 0;
    // nghttp2 queues GOAWAY for protocol errors it finds; a bad preface gets none: say why.
    if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC)
        nghttp2_session_terminate_session(impl_->session, NGHTTP2_PROTOCOL_ERROR);
    if (rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || rv == NGHTTP2_ERR_TOO_MANY_SETTINGS)
        impl_->events.on_guard(guard::flood);
    return false;
}

std::size_t server_session::produce(std::string& out) { return detail::drain(impl_->session, out); }

bool server_session::calmed() const { return impl_->calmed; }

const char* label(guard g) {
    switch (g) {
    case guard::rapid_reset: return "rapid_reset";
    case guard::too_many_streams: return "too_many_streams";
    case guard::header_size: return "header_size";
    case guard::flood: return "flood";
    }
    return "unknown";
}

bool server_session::wants_write() const { return nghttp2_session_want_write(impl_->session) != 0; }

bool server_session::alive() const {
    return nghttp2_session_want_read(impl_->session) != 0 || nghttp2_session_want_write(impl_->session) != 0;
}

void server_session::respond(std::int32_t stream, unsigned status, std::span<const field> fields, bool end_stream,
                             std::span<const field> added) {
    stream_state* s = impl_->find(stream);
    if (!s) return;  // reset meanwhile
    const std::string code = std::to_string(status);
    detail::name_values nva;
    nva.push_back(detail::name_value(":status", code));
    for (const field& f : fields) nva.push_back(detail::name_value(f.name, f.value));
    for (const field& f : added) nva.push_back(detail::name_value(f.name, f.value));
    nghttp2_data_provider body{};
    body.read_callback = &impl::read_body;
    nghttp2_submit_response(impl_->session, stream, nva.data(), nva.size(), end_stream ? nullptr : &body);
}

void server_session::send_body(std::int32_t stream, std::span<const std::uint8_t> data, bool end,
                               std::span<const field> trailers) {
    stream_state* s = impl_->find(stream);
    if (!s) return;
    if (s->body.append(data, end, trailers)) nghttp2_session_resume_data(impl_->session, stream);
}

std::size_t server_session::queued(std::int32_t stream) const {
    const stream_state* s = impl_->find(stream);
    return s ? s->body.queued() : 0;
}

void server_session::consumed(std::int32_t stream, std::size_t n) {
    nghttp2_session_consume(impl_->session, stream, n);
}

void server_session::reset(std::int32_t stream, std::uint32_t error_code) {
    nghttp2_submit_rst_stream(impl_->session, NGHTTP2_FLAG_NONE, stream, error_code);
}

void server_session::go_away() {
    nghttp2_submit_goaway(impl_->session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(impl_->session),
                          NGHTTP2_NO_ERROR, nullptr, 0);
}

}  // namespace politeproxy::http2
