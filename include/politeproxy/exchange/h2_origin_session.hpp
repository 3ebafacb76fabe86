#pragma once
// An HTTP/2 session with one origin, driven from its connection: client_session (sans-io)
// over a timed_socket (TLS when the origin is https, plain TCP for h2c). Requests open
// streams on it and wait on their origin_stream; the session's reader fills them in.
// The origin's SETTINGS_MAX_CONCURRENT_STREAMS becomes its host's stream ceiling at the
// gate (host_gates::set_stream_ceiling), so the host's excess requests wait in its
// queue, never in nghttp2's. An idle session is checked with a PING and closed after
// timeouts.idle. A worker keeps its sessions in origin_sessions: a socket belongs to
// the loop it was opened on.
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/event.hpp"
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/http2/client_session.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include <utility>

namespace politeproxy {

struct exchange_context;

/// One request's stream as its coroutine and the session's reader share it.
struct origin_stream {
    explicit origin_stream(const executor& ex) : changed(ex) {}
    std::int32_t id = 0;
    std::optional<response_head> head;  ///< the final response header, once it came
    std::string body;                          ///< response body bytes not yet taken
    std::vector<field> trailers;        ///< the response's trailer fields, when it ended with some
    bool body_ended = false;
    bool closed = false;      ///< the stream is over (reset when `error` is not 0)
    std::uint32_t error = 0;  ///< its RST_STREAM or the session's end
    /// The origin never processed the request (REFUSED_STREAM, above a GOAWAY's last
    /// stream, or the session ended before it went out): it may go again, on a new session.
    bool unprocessed = false;
    bool uploading = false;  ///< request body bytes still to come (changed is notified as they are framed)
    event changed;  ///< any of the above moved, or the request body's window opened
};

class origin_session : public std::enable_shared_from_this<origin_session>, private http2::origin_events {
public:
    /// `key`: the host key whose ceiling the origin's SETTINGS set; `pool_key`: the
    /// origin's key in ctx.h2_origins. `idle`: how long the session stays open with no stream.
    origin_session(exchange_context& ctx, timed_socket connection, std::string key, std::string pool_key,
                   clock::duration idle, std::size_t max_header_bytes);
    ~origin_session() override;

    /// Starts the session (preface and SETTINGS out, the reader running); true once the
    /// origin's first SETTINGS arrived, false if the session ended first or `timeout` passed.
    task<bool> start(clock::duration timeout);

    /// A new stream may be opened now.
    bool accepts_streams() const { return !ended_ && !closed_ && session_.accepts_streams(); }
    const std::string& pool_key() const { return pool_key_; }

    /// Opens a stream for a request (see client_session::request); null when the session
    /// takes no more streams.
    std::shared_ptr<origin_stream> open(std::string_view method, std::string_view scheme, std::string_view authority,
                                        std::string_view path, std::span<const field> fields, bool end_stream);
    /// Request body bytes (and with the end, its trailers); check queued() before
    /// reading more from the client.
    void send_body(origin_stream& s, std::span<const char> data, bool end, std::span<const field> trailers = {});
    std::size_t queued(const origin_stream& s) const { return session_.queued(s.id); }
    /// The response body bytes taken from `s.body` were forwarded: the origin may send more.
    void consumed(origin_stream& s, std::size_t n);
    /// Resets a stream that is not over yet (CANCEL): its request was abandoned. The
    /// stream is closed at once; what the origin sent for it goes back to the window.
    void cancel(origin_stream& s);

    /// Closes the connection: no new stream here, open streams end with it.
    void close();

private:
    void on_response(std::int32_t stream, response_head head) override;
    void on_body(std::int32_t stream, std::span<const std::uint8_t> data) override;
    void on_trailers(std::int32_t stream, std::vector<field> fields) override;
    void on_body_end(std::int32_t stream) override;
    void on_stream_closed(std::int32_t stream, std::uint32_t error_code) override;
    void on_settings(std::optional<std::uint32_t> max_concurrent_streams) override;
    void on_goaway(std::int32_t last_stream, std::uint32_t error_code) override;

    origin_stream* find(std::int32_t id);
    void upload_done(origin_stream& s);  ///< its request body is all framed, or it ended
    void flush();
    task<void> read_loop(std::shared_ptr<origin_session> self);
    task<void> write_loop(std::shared_ptr<origin_session> self);
    task<void> watch_loop(std::shared_ptr<origin_session> self);
    void end();

    exchange_context& ctx_;
    timed_socket connection_;
    const std::string key_;
    const std::string pool_key_;
    const clock::duration idle_;
    http2::client_session session_;
    std::unordered_map<std::int32_t, std::shared_ptr<origin_stream>> streams_;
    event settled_;  ///< set when the origin's first SETTINGS came, or the session ended
    steady_timer watch_timer_;             ///< watch_loop's (cancelled when the session ends)
    clock::time_point last_active_ = clock::now();  ///< when the last stream closed
    connection_tracker tracked_;                   ///< upstream_connections{protocol="http2"}
    std::size_t uploading_ = 0;  ///< streams of streams_ with request body bytes still to come
    std::string out_;  ///< write_loop's bytes for one write (its room kept: kept_write_room)
    bool writing_ = false;
    bool ended_ = false;   ///< the session is over: no stream goes on
    bool closed_ = false;  ///< the connection is closed
};

struct host_policy;

/// A new session on `connection` (connected, TLS done when the origin is https), started
/// and made the origin's (`pool_key`) session in ctx.h2_origins -- or the one already
/// there, when another request opened one meanwhile. Null when the origin did not
/// answer as HTTP/2 within timeouts.connect.
task<std::shared_ptr<origin_session>> open_origin_session(exchange_context& ctx, timed_socket connection,
                                                          const std::string& key, const std::string& pool_key,
                                                          const host_policy& policy, std::size_t max_header_bytes);

/// One worker's HTTP/2 origin sessions, by pool key ("[https:]host:port"): at most one in
/// use per origin, and at most one being opened (the requests that come meanwhile wait
/// for it rather than open their own). Remembers which origins picked h2 by ALPN, so
/// their next session is opened once too. Used on the worker's own thread only.
class origin_sessions {
public:
    /// The origin's session if one takes new streams; when one is being opened, waits
    /// for it first. Null: none (open one, marked with opening()).
    task<std::shared_ptr<origin_session>> find(const std::string& pool_key);
    /// find() without waiting (no coroutine frame): the session, or null as find() gives
    /// it; nothing while one is being opened (then find() waits for it).
    std::optional<std::shared_ptr<origin_session>> find_now(const std::string& pool_key) const;

    /// While it lives, a session for the origin is being opened: find() waits.
    class opening_mark {
    public:
        opening_mark() = default;
        opening_mark(origin_sessions& owner, std::string pool_key, std::shared_ptr<event> done)
            : owner_(&owner), pool_key_(std::move(pool_key)), done_(std::move(done)) {}
        opening_mark(opening_mark&& o) noexcept
            : owner_(std::exchange(o.owner_, nullptr)), pool_key_(std::move(o.pool_key_)), done_(std::move(o.done_)) {}
        opening_mark& operator=(opening_mark&&) = delete;
        ~opening_mark();

    private:
        origin_sessions* owner_ = nullptr;
        std::string pool_key_;
        std::shared_ptr<event> done_;
    };
    /// A mark when HTTP/2 may be used (`may_h2`), the origin is known to speak it (h2c,
    /// or h2 picked by ALPN before) and no session is being opened; an empty one otherwise.
    opening_mark opening(const std::string& pool_key, bool may_h2, bool h2c, const executor& ex);

    /// `s` becomes the origin's session, unless one that takes new streams is there:
    /// then that one is returned (and `s` should be closed).
    std::shared_ptr<origin_session> adopt(const std::string& pool_key, std::shared_ptr<origin_session> s);
    /// Forgets `s` (it ended, or takes no more streams).
    void forget(const origin_session* s);
    /// Closes every session (shutdown).
    void close_all();

private:
    struct origin {
        std::shared_ptr<origin_session> session;
        std::shared_ptr<event> opening;  ///< set while a session is being opened
        bool picked_h2 = false;          ///< ALPN picked h2 before
    };
    static constexpr std::size_t max_remembered = 10000;
    std::unordered_map<std::string, origin, keyed_string_hash, std::equal_to<>> origins_;
};

}  // namespace politeproxy
