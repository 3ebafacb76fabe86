#pragma once
// HTTP/2 towards clients, sans-io: nghttp2 owns the framing, HPACK and flow control; the
// owner moves bytes (receive() what the client sent, produce() what to send it) and
// hears of requests through `events`. No sockets, no timers, no threads: the adapter
// that drives it from a connection (and gates each stream) is built on top.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/field.hpp"

#include <cstddef>
#include <iterator>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace politeproxy::http2 {

/// A request as a client's HEADERS opened it. nghttp2 has checked the pseudo-header
/// fields and refused connection-specific fields (RFC 9113 section 8.2.2) before this.
struct request_head {
    std::int32_t stream = 0;
    std::string method, scheme, authority, path;
    std::vector<field> fields;  ///< the regular fields, in order
    bool end_stream = false;    ///< no body follows
};

/// Why an abuse guard refused a stream or ended the connection.
enum class guard {
    rapid_reset,       ///< RST_STREAM faster than the bucket allows (CVE-2023-44487): GOAWAY
    too_many_streams,  ///< a stream beyond the advertised SETTINGS_MAX_CONCURRENT_STREAMS: REFUSED_STREAM
    header_size,       ///< a decoded header block over its bound: the stream is reset
    flood,             ///< CONTINUATION, SETTINGS, PING or other frames that flood (nghttp2's checks): GOAWAY
};
inline constexpr guard all_guards[] = {guard::rapid_reset, guard::too_many_streams, guard::header_size, guard::flood};
static_assert([] {
    for (std::size_t i = 0; i < std::size(all_guards); ++i)
        if (all_guards[i] != static_cast<guard>(i)) return false;
    return true;
}(), "all_guards lists the guards in the enum's order: the order is the metric's index");
/// The reason label of h2_streams_refused_total.
const char* label(guard g);

/// What the session tells its owner, from inside receive().
class session_events {
public:
    virtual ~session_events() = default;
    /// An abuse guard acted (for h2_streams_refused_total{reason}).
    virtual void on_guard(guard) {}
    virtual void on_request(request_head head) = 0;
    /// Body bytes of a stream's request. The client may send more only as the owner
    /// reports them consumed() (flow control: a slow origin slows the client).
    virtual void on_body(std::int32_t stream, std::span<const std::uint8_t> data) = 0;
    /// The request's trailer fields, just before on_body_end (only when it has some).
    virtual void on_trailers(std::int32_t, std::vector<field>) {}
    virtual void on_body_end(std::int32_t stream) = 0;
    /// The stream is over: answered and done (error_code 0), or reset by either side.
    virtual void on_stream_closed(std::int32_t stream, std::uint32_t error_code) = 0;
};

class server_session {
public:
    struct settings {
        std::uint32_t max_concurrent_streams = 100;  ///< advertised; streams beyond are refused
        std::size_t max_header_bytes = 64 * 1024;     ///< decoded names + values per header block
        /// Rapid reset (CVE-2023-44487): a client's RST_STREAM frames take tokens from a
        /// bucket of `reset_burst` refilled at `resets_per_second`; one past an empty bucket
        /// ends the connection with GOAWAY ENHANCE_YOUR_CALM.
        double resets_per_second = 100;
        double reset_burst = 200;
    };

    server_session(session_events& events, const settings& s, clock::time_point now);
    ~server_session();
    server_session(const server_session&) = delete;
    server_session& operator=(const server_session&) = delete;

    /// Bytes from the client, read at `now`. False when the connection is to end (a bad
    /// preface, a protocol violation, rapid reset, a CONTINUATION or other flood, the
    /// client's GOAWAY): read no more, send what produce() gives (a GOAWAY where one is
    /// due; none after a flood nghttp2 calls fatal), then close.
    bool receive(std::span<const std::uint8_t> bytes, clock::time_point now);

    /// Whether the connection was ended for resetting streams too fast (for the owner's
    /// h2_streams_refused_total{reason="rapid_reset"}).
    bool calmed() const;

    /// Appends the frames to send to the client now; returns how many bytes.
    std::size_t produce(std::string& out);
    /// Whether produce() has frames to give (most received frames need no answer).
    bool wants_write() const;

    /// False once both sides are done (GOAWAY sent or received and no stream is open).
    bool alive() const;

    /// The response's header block: `:status`, `fields`, then `added` (what the proxy adds
    /// to a header it forwards, so the origin's fields need no copy); `end_stream`: no body.
    void respond(std::int32_t stream, unsigned status, std::span<const field> fields, bool end_stream,
                 std::span<const field> added = {});
    /// Body bytes of a stream's response, queued and sent as flow control allows;
    /// `end` closes the stream's side, after `trailers` when there are any. Check
    /// queued() to stop reading from the origin.
    void send_body(std::int32_t stream, std::span<const std::uint8_t> data, bool end,
                   std::span<const field> trailers = {});
    /// Bytes of a stream's response body not yet framed (the client's window is shut).
    std::size_t queued(std::int32_t stream) const;
    /// The owner forwarded `n` body bytes of the stream: the client may send as many more.
    /// Every byte on_body() gave must be reported, also after its stream closed: the
    /// connection's window counts them for all streams.
    void consumed(std::int32_t stream, std::size_t n);
    void reset(std::int32_t stream, std::uint32_t error_code);
    /// GOAWAY (NO_ERROR) naming the last stream processed: the client opens no more
    /// streams here and may retry later ones elsewhere; open streams are served to the end.
    void go_away();

    struct impl;

private:
    std::unique_ptr<impl> impl_;
};

}  // namespace politeproxy::http2
