#include "politeproxy/http2/client_session.hpp"

#include "session_parts.hpp"

#include <nghttp2/nghttp2.h>

#include <charconv>
#include <stdexcept>
#include <unordered_map>

namespace politeproxy::http2 {

namespace {

using detail::view;

struct stream_state {
    response_head head;
    std::vector<field> trailers;  ///< the trailer section, once the final response began
    std::size_t header_bytes = 0;
    bool final_seen = false;      ///< a final (non-1xx) response header arrived
    detail::outgoing_body body;  ///< the request's
};

}  // namespace

struct client_session::impl {
    origin_events& events;
    settings limits;
    nghttp2_session* session = nullptr;
    std::unordered_map<std::int32_t, stream_state> streams;
    std::uint64_t pings_acked = 0;
    bool goaway_received = false;

    impl(origin_events& e, const settings& s) : events(e), limits(s) {}

    stream_state* find(std::int32_t id) {
        const auto it = streams.find(id);
        return it == streams.end() ? nullptr : &it->second;
    }

    static impl& self(void* user) { return *static_cast<impl*>(user); }

    static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
        if (stream_state* s = self(user).find(frame->hd.stream_id); s && !s->final_seen) {
            s->head.fields.clear();  // after an interim response: the next one starts afresh
            s->head.fields.reserve(typical_field_count);
            s->head.status = 0;
            s->header_bytes = 0;
        }
        return 0;
    }

    static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                         const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) {
        auto& me = self(user);
        stream_state* s = me.find(frame->hd.stream_id);
        if (!s) return 0;
        // The bound applies to the decoded block (HPACK can inflate a small frame): past
        // it the stream is reset, the session goes on.
        s->header_bytes += detail::field_size(namelen, valuelen);
        if (s->header_bytes > me.limits.max_header_bytes) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        const auto n = view(name, namelen);
        const auto v = view(value, valuelen);
        if (s->final_seen) {  // trailers (nghttp2 refused pseudo-header fields in them)
            s->trailers.push_back(field{std::string(n), std::string(v)});
            return 0;
        }
        if (n == ":status") {
            unsigned code = 0;
            std::from_chars(v.data(), v.data() + v.size(), code);  // nghttp2 checked: three digits
            s->head.status = code;
        } else {
            s->head.fields.push_back(field{std::string(n), std::string(v)});
        }
        return 0;
    }

    static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
        auto& me = self(user);
        switch (frame->hd.type) {
        case NGHTTP2_SETTINGS:
        {
            if (frame->hd.flags & NGHTTP2_FLAG_ACK) return 0;
            // Never set by the origin: nghttp2 reports its initial "unlimited".
            constexpr std::uint32_t unlimited = 0xffffffffu;
            const std::uint32_t streams =
                nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
            me.events.on_settings(streams == unlimited ? std::nullopt
                                                                                    : std::optional(streams));
            return 0;
        }
        case NGHTTP2_GOAWAY:
            me.goaway_received = true;
            me.events.on_goaway(frame->goaway.last_stream_id, frame->goaway.error_code);
            return 0;
        case NGHTTP2_PING:
            if (frame->hd.flags & NGHTTP2_FLAG_ACK) ++me.pings_acked;
            return 0;
        default: break;
        }
        stream_state* s = me.find(frame->hd.stream_id);
        if (!s) return 0;
        const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
        if (frame->hd.type == NGHTTP2_HEADERS && !s->final_seen) {
            if (s->head.status < 200) return 0;  // interim: dropped (nghttp2 refuses 101 in HTTP/2)
            s->final_seen = true;
            s->head.end_stream = end_stream;
            me.events.on_response(frame->hd.stream_id, std::move(s->head));
            s->head = response_head{};
            if (!end_stream) return 0;
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

    static ssize_t read_body(nghttp2_session* session, std::int32_t stream, std::uint8_t* buf, std::size_t length,
                             std::uint32_t* flags, nghttp2_data_source*, void* user) {
        stream_state* s = self(user).find(stream);
        if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        return s->body.frame(session, stream, buf, length, flags);
    }
};

client_session::client_session(origin_events& events, const settings& s) : impl_(std::make_unique<impl>(events, s)) {
    const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(s.max_header_bytes)},
    };
    const detail::session_callbacks callbacks{&impl::on_begin_headers, &impl::on_header, &impl::on_frame_recv, &impl::on_data_chunk,
                                                   &impl::on_stream_close};
    impl_->session = detail::new_session(detail::side::client, callbacks, impl_.get(), iv);
}

client_session::~client_session() { nghttp2_session_del(impl_->session); }

bool client_session::receive(std::span<const std::uint8_t> bytes) {
    nghttp2_session* s = impl_->session;
    const ssize_t rv = nghttp2_session_mem_recv(s, bytes.data(), bytes.size());
    if (rv < 0 || nghttp2_session_want_read(s) == 0) return false;
    // A connection error nghttp2 answers itself queues a GOAWAY and refuses new
    // streams; it still wants to read until that GOAWAY is sent. (The origin's own
    // GOAWAY refuses new streams too, but the open ones are still to be read.)
    const bool ids_left = nghttp2_session_get_next_stream_id(s) <= INT32_MAX;
    return impl_->goaway_received || !ids_left || nghttp2_session_check_request_allowed(s) != 0;
}

std::size_t client_session::produce(std::string& out) { return detail::drain(impl_->session, out); }

bool client_session::wants_write() const { return nghttp2_session_want_write(impl_->session) != 0; }

bool client_session::alive() const {
    return nghttp2_session_want_read(impl_->session) != 0 || nghttp2_session_want_write(impl_->session) != 0;
}

bool client_session::accepts_streams() const {
    return nghttp2_session_check_request_allowed(impl_->session) != 0;
}

std::size_t client_session::open_streams() const { return impl_->streams.size(); }

std::int32_t client_session::request(std::string_view method, std::string_view scheme, std::string_view authority,
                                     std::string_view path, std::span<const field> fields, bool end_stream) {
    if (!accepts_streams()) return 0;
    detail::name_values nva;
    nva.push_back(detail::name_value(":method", method));
    nva.push_back(detail::name_value(":scheme", scheme));
    nva.push_back(detail::name_value(":authority", authority));
    nva.push_back(detail::name_value(":path", path));
    for (const field& f : fields) nva.push_back(detail::name_value(f.name, f.value));
    nghttp2_data_provider body{};
    body.read_callback = &impl::read_body;
    const std::int32_t id =
        nghttp2_submit_request(impl_->session, nullptr, nva.data(), nva.size(), end_stream ? nullptr : &body, nullptr);
    if (id <= 0) return 0;
    impl_->streams[id];
    return id;
}

void client_session::send_body(std::int32_t stream, std::span<const std::uint8_t> data, bool end,
                               std::span<const field> trailers) {
    stream_state* s = impl_->find(stream);
    if (s && s->body.append(data, end, trailers)) nghttp2_session_resume_data(impl_->session, stream);
}

std::size_t client_session::queued(std::int32_t stream) const {
    const stream_state* s = impl_->find(stream);
    return s ? s->body.queued() : 0;
}

void client_session::consumed(std::int32_t stream, std::size_t n) { nghttp2_session_consume(impl_->session, stream, n); }

void client_session::reset(std::int32_t stream, std::uint32_t error_code) {
    nghttp2_submit_rst_stream(impl_->session, NGHTTP2_FLAG_NONE, stream, error_code);
}

void client_session::ping() { nghttp2_submit_ping(impl_->session, NGHTTP2_FLAG_NONE, nullptr); }

std::uint64_t client_session::pings_acked() const { return impl_->pings_acked; }

}  // namespace politeproxy::http2
