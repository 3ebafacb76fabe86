#pragma once
// The HTTP/2 origin transport (exchange/origin_transport.hpp): one request as one stream
// of the origin's session (exchange/h2_origin_session), whatever protocol the client
// speaks. The request goes as a message (pseudo-header fields, regular fields, body
// pieces), the response comes back as one (status, fields, body pieces); the client's
// adapter (`Client`, exchange/client_side.hpp) turns each into its own framing.
// Included by forward_to_origin.hpp only.
#include "politeproxy/exchange/client_side.hpp"
#include "politeproxy/exchange/exchange.hpp"
#include "politeproxy/exchange/h2_origin_session.hpp"
#include "politeproxy/exchange/origin_transport.hpp"
#include "politeproxy/http1/body_reader.hpp"
#include "politeproxy/http1/origin_target.hpp"
#include "politeproxy/http1/relay.hpp"

#include <nghttp2/nghttp2.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

// Cancels the origin stream on every way out but its end (an error, the client gone, an
// exception): the origin stops, and what it sent meanwhile is given back to its window.
class stream_guard {
public:
    stream_guard(origin_session& session, std::shared_ptr<origin_stream> stream)
        : session_(session), stream_(std::move(stream)) {}
    stream_guard(const stream_guard&) = delete;
    stream_guard& operator=(const stream_guard&) = delete;
    ~stream_guard() { session_.cancel(*stream_); }

private:
    origin_session& session_;
    std::shared_ptr<origin_stream> stream_;
};

/// One request as a stream of `session`. `reused`: the session served requests before
/// this one (reported with the response). forward() says `again` when the origin did not
/// process the stream (above a GOAWAY's last stream, REFUSED_STREAM) before any of its
/// body was sent, or when the session takes no new stream.
class h2_origin_stream {
public:
    /// `via`: this proxy's Via entry, added to the request's fields.
    h2_origin_stream(origin_session& session, bool reused, std::string_view via)
        : session_(session), reused_(reused), via_(via) {}

    template <client_side Client>
    task<forwarded> forward(Client& down, exchange& trip, const origin_target& target, relay_buffers& scratch);

private:
    origin_session& session_;
    bool reused_;
    std::string_view via_;
};

template <client_side Client>
task<forwarded> h2_origin_stream::forward(Client& down, exchange& trip, const origin_target& target,
                                     relay_buffers& scratch) {
    origin_session& session = session_;
    const host_policy& policy = trip.policy();
    // The message's fields, then what the proxy decided: the length when known, Via.
    std::vector<field> fields;
    fields.reserve(typical_field_count);
    down.message_fields([&](std::string_view name, std::string_view value) {
        fields.push_back({std::string(name), std::string(value)});
    });
    if (const body_framing body = down.body(); body.kind == body_kind::length)
        fields.push_back({"content-length", std::to_string(body.length)});
    fields.push_back({"via", std::string(via_)});
    std::string& authority = scratch.added;
    authority.clear();
    target.append_host(authority);
    const std::string_view path = target.no_path && down.method_string() == "OPTIONS" ? "*" : std::string_view(target.path);
    const bool body = down.has_body();
    const auto stream = session.open(down.method_string(), target.tls ? "https" : "http", authority, path, fields, !body);
    if (!stream) co_return forwarded::again;
    const stream_guard guard(session, stream);
    // A client that goes away wakes the waits below (until this returns: the event dies with the stream).
    struct watching {
        Client& down;
        ~watching() { down.watch(nullptr); }
    } const watched{down};
    down.watch(&stream->changed);
    trip.request_sent();
    const auto answer = [&](errc why, std::string_view details) -> task<forwarded> {
        const bool keep = co_await down.answer(why, details, {}, trip.next_hop());
        co_return finished(keep);
    };

    // The request body, as the origin's flow-control window takes it. The stall deadline
    // moves only when the origin takes bytes.
    bool body_started = false;
    if (down.wants_continue() && !co_await down.send_continue()) co_return forwarded::close;
    if (body) {
        const std::span<char> room(scratch.body_buffer(), relay_buffers::chunk_size);
        for (auto deadline = clock::now() + policy.timeouts.idle;;) {
            while (!stream->closed && !down.client_gone() && session.queued(*stream) >= relay_buffers::chunk_size)
                if (!co_await stream->changed.wait_until(deadline)) break;
            if (down.client_gone()) co_return forwarded::close;
            if (stream->closed) break;  // the origin answered early or reset it: read no more
            if (session.queued(*stream) >= relay_buffers::chunk_size) {
                trip.response_failed(errc::origin_response_timeout);
                co_return co_await answer(errc::origin_response_timeout,
                                          "the origin took no request body for timeouts.idle");
            }
            const auto piece = co_await down.read_body(room, policy.timeouts.idle);
            if (piece.failure.end != relay_end::done) {
                trip.client_failed();
                const bool keep = co_await down.upload_broken(piece.failure);
                co_return finished(keep);
            }
            body_started = true;
            session.send_body(*stream, room.first(piece.size), piece.last,
                              piece.last ? down.request_trailers() : std::span<const field>());
            deadline = clock::now() + policy.timeouts.idle;
            if (piece.last) break;
        }
    }

    // The response header.
    const auto deadline = clock::now() + policy.timeouts.response_headers;
    while (!stream->head && !stream->closed && !down.client_gone()) {
        if (!co_await stream->changed.wait_until(deadline)) {
            trip.response_failed(errc::origin_response_timeout);
            co_return co_await answer(errc::origin_response_timeout, "no response headers within timeouts.response_headers");
        }
    }
    if (down.client_gone()) co_return forwarded::close;
    if (!stream->head) {
        if (stream->unprocessed && !body_started) co_return forwarded::again;
        trip.response_failed(errc::origin_closed);
        co_return co_await answer(errc::origin_closed,
                                  std::string("the origin reset the stream: ") + nghttp2_http2_strerror(stream->error));
    }
    const response_head& head = *stream->head;
    const auto field_value = [&](std::string_view name) {
        for (const auto& f : head.fields)
            if (f.name == name) return std::string_view(f.value);
        return std::string_view();
    };
    trip.response_arrived(head.status, field_value, down.method_string(), reused_);
    if (!co_await down.respond_message(trip, head)) co_return forwarded::close;

    // The response body, as the client takes it: the origin's window opens as it does.
    std::string& piece = scratch.joined;
    for (auto stall = clock::now() + policy.timeouts.idle;;) {
        if (down.client_gone()) co_return forwarded::close;
        if (!stream->body.empty() || stream->body_ended) {
            piece.swap(stream->body);
            stream->body.clear();
            const bool last = stream->body_ended;
            const bool sent = co_await down.respond_body(piece, last, stream->trailers);
            session.consumed(*stream, piece.size());
            if (!sent) {
                trip.origin_done();
                co_return forwarded::close;
            }
            if (last) break;
            stall = clock::now() + policy.timeouts.idle;
            continue;
        }
        if (stream->closed) {  // reset before its end: the client must not take it for whole
            trip.body_failed(false);
            down.body_broken();
            co_return forwarded::close;
        }
        if (!co_await stream->changed.wait_until(stall)) {
            trip.body_failed(true);
            down.body_broken();
            co_return forwarded::close;
        }
    }
    trip.origin_done();
    co_return finished(down.keeps_message());
}

}  // namespace politeproxy
