#pragma once
// HTTP/2 towards an origin, sans-io, as server_session is towards clients: nghttp2 owns
// the framing, HPACK and flow control; the owner moves bytes (produce() what to send,
// receive() what the origin sent) and hears of responses through `events`. The adapter
// that drives it from a connection, and maps its streams to gated requests, is built on
// top.
#include "politeproxy/base/response_head.hpp"
#include "politeproxy/http2/server_session.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy::http2 {

/// What the session tells its owner, from inside receive().
class origin_events {
public:
    virtual ~origin_events() = default;
    /// A stream's final response header (interim 1xx responses are dropped). nghttp2 has
    /// checked it as HTTP/2 requires (a `:status`, no connection-specific fields) first.
    virtual void on_response(std::int32_t stream, response_head head) = 0;
    /// Body bytes of a stream's response. The origin may send more only as the owner
    /// reports them consumed() (flow control: a slow client slows the origin).
    virtual void on_body(std::int32_t stream, std::span<const std::uint8_t> data) = 0;
    /// The response's trailer fields, just before on_body_end (only when it has some).
    virtual void on_trailers(std::int32_t, std::vector<field>) {}
    virtual void on_body_end(std::int32_t stream) = 0;
    /// The stream is over: done (error_code 0) or reset. REFUSED_STREAM, and streams the
    /// origin's GOAWAY left unprocessed, were never processed: they may be sent again.
    virtual void on_stream_closed(std::int32_t stream, std::uint32_t error_code) = 0;
    /// Each SETTINGS frame of the origin (the first one ends the session's set-up) with
    /// its SETTINGS_MAX_CONCURRENT_STREAMS: how many requests it takes at once on this
    /// session; nullopt while the origin set none (no limit).
    virtual void on_settings(std::optional<std::uint32_t> max_concurrent_streams) = 0;
    /// GOAWAY: no new stream on this session; streams above `last_stream` were not
    /// processed (they close with REFUSED_STREAM) and may be retried on a new session.
    virtual void on_goaway(std::int32_t last_stream, std::uint32_t error_code) = 0;
};

class client_session {
public:
    struct settings {
        std::size_t max_header_bytes = 64 * 1024;  ///< decoded names + values per response header block
    };

    client_session(origin_events& events, const settings& s);
    ~client_session();
    client_session(const client_session&) = delete;
    client_session& operator=(const client_session&) = delete;

    /// Bytes from the origin. False when the session is to end (a protocol violation,
    /// a flood nghttp2 calls fatal, or GOAWAY with no stream left open): send what
    /// produce() gives, then close.
    bool receive(std::span<const std::uint8_t> bytes);

    /// Appends the frames to send to the origin now (the connection preface and
    /// SETTINGS first); returns how many bytes.
    std::size_t produce(std::string& out);
    /// Whether produce() has frames to give: a window update is due only now and then.
    bool wants_write() const;

    /// False once both sides are done (GOAWAY and no stream open).
    bool alive() const;
    /// Whether a new stream may be opened: no GOAWAY either way, stream ids left.
    bool accepts_streams() const;
    /// Streams open now (requests sent and not closed).
    std::size_t open_streams() const;

    /// Opens a stream for a request: `fields` are the regular ones (lowercase names,
    /// no connection-specific fields); `end_stream`: no body. Returns the stream id, or
    /// 0 when no stream can be opened (see accepts_streams()).
    std::int32_t request(std::string_view method, std::string_view scheme, std::string_view authority,
                         std::string_view path, std::span<const field> fields, bool end_stream);
    /// Body bytes of a stream's request, sent as flow control allows; `end` closes the
    /// stream's side, after `trailers` when there are any. Check queued() to stop
    /// reading from the client.
    void send_body(std::int32_t stream, std::span<const std::uint8_t> data, bool end,
                   std::span<const field> trailers = {});
    std::size_t queued(std::int32_t stream) const;
    /// The owner forwarded `n` body bytes of the stream's response: the origin may send
    /// as many more. Every byte on_body() gave must be reported, also after its stream closed.
    void consumed(std::int32_t stream, std::size_t n);
    void reset(std::int32_t stream, std::uint32_t error_code);

    /// A PING (keep-alive of an idle session); pings_acked() counts the answers.
    void ping();
    std::uint64_t pings_acked() const;

    struct impl;

private:
    std::unique_ptr<impl> impl_;
};

}  // namespace politeproxy::http2
