#pragma once
// The HTTP/2 client side's parts, private to proxy/server/: a request stream as the
// connection and its request coroutine share it (h2_stream), the stream as
// forward_to_origin's client adapter (h2_client_side, defined in h2_client_side.cpp), and
// the connection that drives nghttp2 from the socket (h2_connection, whose streams'
// serving is in h2_connection.cpp).
#include "politeproxy/server/h2_connection.hpp"


#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/char_class.hpp"
#include "politeproxy/base/event.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/http1/answers.hpp"
#include "politeproxy/http1/body_reader.hpp"
#include "politeproxy/exchange/forward_to_origin.hpp"
#include "politeproxy/http1/hop_by_hop.hpp"
#include "politeproxy/server/client_identity.hpp"
#include "politeproxy/server/entry_target.hpp"
#include "politeproxy/server/proxy_auth.hpp"
#include "politeproxy/server/send_answer.hpp"
#include "politeproxy/http1/request_head.hpp"
#include "politeproxy/http2/server_session.hpp"
#include "politeproxy/net/send_all.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace politeproxy::h2_serving {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;


// A field addressed to this proxy, never forwarded: the client's credentials for it
// (nghttp2 lets it through: it is not connection-specific in HTTP/2's sense).
inline bool for_the_proxy(std::string_view name) { return name == "proxy-authorization"; }

inline std::string peer_address(timed_socket& client) {
    boost::system::error_code ec;
    const auto peer = client.socket().remote_endpoint(ec);
    return ec ? std::string() : address_text(peer.address());
}

// What a stream's head alone decides: the rules every protocol's requests meet
// (policy/entry_rules.hpp), as HTTP/1.1's check_request_head applies them, then the
// target's scheme, which must be the connection's (as an HTTP/1.1 target's is checked
// when it is parsed). nghttp2 has refused malformed pseudo-header and connection-specific
// fields, and holds DATA to a content-length.
inline request_verdict judge_head(const http2::request_head& head, const limits_config& limits, bool in_tls) {
    entry_facts facts;
    facts.method = entry_method_of(head.method);
    facts.asterisk = head.path == "*";
    facts.field_lines = 1;  // :authority, as HTTP/1.1 counts Host
    bool cookie = false;
    for (const auto& f : head.fields) {
        if (f.name == "cookie") {  // crumbs of one field (RFC 9113 section 8.2.3): one line in HTTP/1.1
            facts.field_lines += cookie ? 0 : 1;
            cookie = true;
            continue;
        }
        ++facts.field_lines;
        if (f.name == "max-forwards" && facts.max_forwards_fields++ == 0) facts.max_forwards = f.value;
    }
    request_verdict v{judge_entry(facts, limits.request_header_fields), {}, false};
    if (!v.refusal && head.scheme != (in_tls ? "https" : "http")) {
        v.refusal = errc::unsupported_scheme;
        v.details = in_tls ? "only :scheme https is forwarded inside TLS" : "only :scheme http is forwarded over h2c";
    }
    return v;
}

constexpr std::size_t read_room = 16 * 1024;

inline std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// One request stream as the connection and its request coroutine share it.
struct h2_stream {
    h2_stream(const executor& ex, http2::request_head h) : head(std::move(h)), changed(ex), gone(ex) {}
    http2::request_head head;
    std::string body;         ///< request body bytes received and not yet forwarded
    std::vector<field> trailers;  ///< the request's trailer fields, if it ended with some
    bool body_ended = false;  ///< the client's END_STREAM came
    event changed;            ///< body bytes or their end arrived, or the send window moved
    event gone;               ///< set when the stream closed (reset, or the connection ended)
    event* watcher = nullptr;  ///< also notified when it closes (the origin stream's wait)
    bool discarding = false;   ///< the exchange is over: request body bytes are dropped as they come

    void close() {
        gone.set();
        changed.notify();
        if (watcher) watcher->notify();
    }
};

class h2_connection;

// The client's side of one request on an HTTP/2 stream, as forward_to_origin wants it
// (exchange/client_side.hpp): the request as a message (the stream's fields, its DATA as
// they arrive), the response sent back as HEADERS and DATA within the client's
// flow-control window. It knows nothing of the origin's protocol.
class h2_client_side {
public:
    /// `max_forwards`: the value an OPTIONS request forwards (one less than it came), or -1.
    h2_client_side(h2_connection& conn, std::shared_ptr<h2_stream> s, wire_allocator arena, body_framing body,
                  long long max_forwards)
        : conn_(&conn), s_(std::move(s)), arena_(arena), body_(body), max_forwards_(max_forwards) {}

    bool via_loop(std::string_view via) const;
    bool retryable() const {
        return body_.kind == body_kind::none && forwarding::idempotent(http::string_to_verb(s_->head.method));
    }
    std::string_view method_string() const { return s_->head.method; }
    std::string_view user_agent() const {
        for (const auto& f : s_->head.fields)
            if (f.name == "user-agent") return f.value;
        return {};
    }
    wire_allocator arena() { return arena_; }
    const std::shared_ptr<client_state>& client() const { return who_; }
    /// Whose request it is (clients:), known once its credentials are.
    void belongs_to(std::shared_ptr<client_state> who) { who_ = std::move(who); }

    task<bool> answer(errc why, std::string_view details, std::optional<clock::duration> retry_after = std::nullopt,
                      std::string_view next_hop = {});
    /// One of the proxy's own answers (made for HTTP/1.1), as HTTP/2 carries it.
    void respond_with(const politeproxy::answer& res);
    client_watch parking() { return &s_->gone; }
    bool wants_continue() const { return false; }
    task<bool> send_continue() { co_return true; }
    task<bool> upload_broken(const relay_status& sent);

    // The request and its response as messages (exchange/h1_origin_transport.hpp, exchange/h2_origin_stream.hpp).
    // nghttp2 refused connection-specific fields (RFC 9113 section 8.2.2) but TE:
    // trailers; Host, the length and TE are the proxy's to write. Expect is not passed on:
    // the body streams as it comes (a 100 Continue would only be dropped here).
    template <class Each>
    void message_fields(Each each) const {
        for (const auto& f : s_->head.fields)
            if (f.name != "host" && f.name != "content-length" && f.name != "te" && f.name != "expect" &&
                !for_the_proxy(f.name) && (max_forwards_ < 0 || f.name != "max-forwards"))
                each(f.name, f.value);
        if (max_forwards_ >= 0) each("max-forwards", std::to_string(max_forwards_));
    }
    body_framing body() const { return body_; }
    bool has_body() const { return body_.kind != body_kind::none; }
    std::span<const field> request_trailers() const { return s_->trailers; }
    task<body_reader::piece> read_body(std::span<char> room, clock::duration idle);
    task<bool> respond_message(exchange& trip, const response_head& head);
    task<bool> respond_body(std::span<const char> data, bool last, std::span<const field> trailers = {});
    void body_broken();
    bool keeps_message() const { return true; }
    void watch(event* e) { s_->watcher = e; }
    bool client_gone() const { return s_->gone.is_set(); }

private:
    h2_connection* conn_;
    std::shared_ptr<h2_stream> s_;
    wire_allocator arena_;
    body_framing body_;  ///< how the request body goes to the origin
    long long max_forwards_;
    std::shared_ptr<client_state> who_;  ///< whose request (clients:)
    bool responded_whole_ = false;  ///< the response's HEADERS ended the stream
};
// A stream gives messages only: every origin transport frames them (exchange/client_side.hpp).
static_assert(client_side<h2_client_side> && !relays_http1<h2_client_side>);

class h2_connection : public http2::session_events {
public:
    h2_connection(proxy_context& ctx, timed_socket& client, const config& cfg, bool allowed,
                  const intercepted_origin* in_tls)
        : ctx_(ctx),
          client_(client),
          allowed_(allowed),
          in_tls_(in_tls),
          session_(*this,
                   http2::server_session::settings{
                       .max_concurrent_streams = static_cast<std::uint32_t>(cfg.limits.h2_max_concurrent_streams),
                       .max_header_bytes = cfg.limits.request_header_bytes},
                   clock::now()),
          idle_(cfg.defaults.timeouts.idle),
          drained_(client.get_executor()),
          finished_(client.get_executor()),
          peer_(peer_address(client)),
          credentials_checked_(client.get_executor()) {
        client.read_unmarked();  // streams at once: no turns to read in
    }

    proxy_context& ctx() { return ctx_; }
    http2::server_session& session() { return session_; }
    event& drained() { return drained_; }

    // Sends what the session has to send, now or once the write in progress is done.
    void flush() {
        if (writing_ || closed_) return;
        writing_ = true;
        ++running_;
        asio::co_spawn(client_.get_executor(), write_loop(), [this](std::exception_ptr) { done_one(); });
    }

    task<void> run(beast::flat_buffer& buffer) {
        for (bool more = true; more;) {
            if (buffer.size() > 0) {
                const auto data = buffer.data();
                more = session_.receive({static_cast<const std::uint8_t*>(data.data()), data.size()}, clock::now());
                buffer.consume(buffer.size());
                if (!more) break;
                // A writer only with frames to send (a WINDOW_UPDATE from the client lets
                // bodies go on); a drain's last stream closing starts its own (on_stream_closed).
                if (session_.wants_write()) flush();
            }
            set_deadline();
            auto [ec, n] = co_await client_.async_read_some(buffer.prepare(read_room), use_tuple);
            if (ec) break;
            buffer.commit(n);
        }
        // The client is gone or the session is over: no stream goes on, parked ones
        // leave their queues; what the session still has to say (a GOAWAY) is sent.
        for (auto& [id, s] : streams_) s->close();
        drained_.notify();
        flush();
        while (running_ > 0) co_await finished_.wait();
        closed_ = true;
    }

    // A drain: GOAWAY naming the last stream taken; those go on, the connection closes
    // once they are done.
    void drain() {
        if (draining_) return;
        draining_ = true;
        session_.go_away();
        flush();
    }

    // session_events: called from inside session_.receive().
    void on_request(http2::request_head head) override {
        const std::int32_t id = head.stream;
        auto s = std::make_shared<h2_stream>(client_.get_executor(), std::move(head));
        streams_[id] = s;
        set_deadline();
        ++running_;
        asio::co_spawn(client_.get_executor(), serve_stream(std::move(s)), [this](std::exception_ptr e) {
            if (e && ctx_.log.enabled(log_level::warn)) ctx_.log.write(log_level::warn, "h2", "a stream failed");
            done_one();
        });
    }
    void on_body(std::int32_t id, std::span<const std::uint8_t> data) override {
        const auto it = streams_.find(id);
        if (it == streams_.end() || it->second->discarding) return session_.consumed(id, data.size());
        it->second->body.append(reinterpret_cast<const char*>(data.data()), data.size());
        it->second->changed.notify();
    }
    void on_trailers(std::int32_t id, std::vector<field> fields) override {
        if (const auto it = streams_.find(id); it != streams_.end()) it->second->trailers = std::move(fields);
    }
    void on_body_end(std::int32_t id) override {
        if (const auto it = streams_.find(id); it != streams_.end()) {
            it->second->body_ended = true;
            it->second->changed.notify();
        }
    }
    // The metrics know the guards' labels in all_guards' order (proxy_server), the enum's.
    void on_guard(http2::guard g) override { ctx_.metrics.h2_refused(static_cast<std::size_t>(g)); }
    void on_stream_closed(std::int32_t id, std::uint32_t) override {
        const auto it = streams_.find(id);
        if (it == streams_.end()) return;
        h2_stream& s = *it->second;
        if (!s.body.empty()) session_.consumed(id, s.body.size());  // never forwarded: the window must not shrink
        s.body.clear();
        s.close();
        drained_.notify();  // a response waiting for the window stops waiting
        streams_.erase(it);
        set_deadline();
        if (credentials_refused_) drain();  // wrong credentials came: the connection ends
        if (draining_ && streams_.empty()) flush();  // then the close
    }

private:
    task<void> write_loop() {
        // After what is ready to run now: the frames of every stream it touches go in one write.
        co_await asio::post(client_.get_executor(), asio::deferred);
        std::string& out = out_;
        for (;;) {
            out.clear();
            session_.produce(out);
            drained_.notify();  // bodies were framed: their streams may queue more
            if (out.empty()) break;
            client_.expires_after(idle_);  // a client that stops reading is cut off after timeouts.idle
            if (auto [ec, n] = co_await send_all(client_, asio::buffer(out)); ec) {
                boost::system::error_code ignored;
                client_.socket().close(ignored);  // the reader ends, and with it every stream
                break;
            }
            set_deadline();
        }
        settle_write_room(out, !streams_.empty());
        writing_ = false;
        // The GOAWAY is out and no stream is left (a drain), or the session is over (a
        // connection error's GOAWAY is out: RFC 9113 section 5.4.1, the connection closes
        // now, not after timeouts.idle): the reader ends, and with it the connection.
        if ((draining_ && streams_.empty()) || !session_.alive()) client_.cancel();
    }

    // The connection's one deadline (reads and writes share it): timeouts.idle while no
    // stream is open, none while one is (each stream's origin has its own timeouts).
    void set_deadline() {
        if (streams_.empty())
            client_.expires_after(idle_);
        else
            client_.expires_never();
    }

    task<void> serve_stream(std::shared_ptr<h2_stream> s);

    // One credential check at a time on a connection, and none after a wrong one, so its
    // streams cannot queue a hash each: a wrong guess ends the connection (GOAWAY), as on
    // HTTP/1.1, and the streams already open are answered 407 unhashed. Missing
    // credentials leave it open (the client's retry with them).
    task<std::optional<auth_refusal>> check_credentials(const config& cfg, const proxy_credentials& credentials,
                                                        std::string& user) {
        while (checking_credentials_ && !credentials_refused_) co_await credentials_checked_.wait();
        if (credentials_refused_)
            co_return auth_refusal{errc::proxy_auth_required, "wrong credentials ended this connection", {}};
        struct turn {
            h2_connection& c;
            explicit turn(h2_connection& conn) : c(conn) { c.checking_credentials_ = true; }
            ~turn() {
                c.checking_credentials_ = false;
                c.credentials_checked_.notify();
            }
        } const mine(*this);
        auto refused = co_await refuse_credentials(ctx_, cfg, credentials, peer_, &user);
        if (refused && refused->why == errc::proxy_auth_required && credentials.fields > 0)
            credentials_refused_ = true;  // the GOAWAY follows once this stream's 407 is out (on_stream_closed)
        co_return refused;
    }

    void done_one() {
        if (--running_ == 0) finished_.notify();
    }

    proxy_context& ctx_;
    timed_socket& client_;
    const bool allowed_;
    const intercepted_origin* in_tls_;  ///< set inside intercepted TLS
    http2::server_session session_;
    std::unordered_map<std::int32_t, std::shared_ptr<h2_stream>> streams_;
    const clock::duration idle_;
    event drained_;   ///< notified each time the session framed what was queued
    event finished_;  ///< notified when the last stream or write coroutine ends
    std::size_t running_ = 0;
    std::string out_;  ///< write_loop's bytes for one write (its room kept: kept_write_room)
    bool writing_ = false;
    bool closed_ = false;
    bool draining_ = false;  ///< GOAWAY sent for a drain
    const std::string peer_;  ///< the client's address: whose turn a new credential's hash takes
    bool checking_credentials_ = false;
    bool credentials_refused_ = false;  ///< a wrong credential came: the connection is ending
    event credentials_checked_;
};

}  // namespace politeproxy::h2_serving
