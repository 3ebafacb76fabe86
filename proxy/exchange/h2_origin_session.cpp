#include "politeproxy/exchange/h2_origin_session.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/net/send_all.hpp"
#include "politeproxy/exchange/exchange_context.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <utility>

namespace politeproxy {
namespace asio = boost::asio;

namespace {

std::span<const std::uint8_t> bytes_of(std::span<const char> s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

origin_session::origin_session(exchange_context& ctx, timed_socket connection, std::string key, std::string pool_key,
                               clock::duration idle, std::size_t max_header_bytes)
    : ctx_(ctx),
      connection_(std::move(connection)),
      key_(std::move(key)),
      pool_key_(std::move(pool_key)),
      idle_(idle),
      session_(*this, http2::client_session::settings{.max_header_bytes = max_header_bytes}),
      settled_(connection_.get_executor()),
      watch_timer_(connection_.get_executor()),
      tracked_(ctx.metrics, connection_side::origin, connection_protocol::http2) {
    connection_.read_unmarked();  // streams at once: no turns to read in
}

origin_session::~origin_session() = default;

task<bool> origin_session::start(clock::duration timeout) {
    auto self = shared_from_this();
    asio::co_spawn(connection_.get_executor(), read_loop(self), asio::detached);
    asio::co_spawn(connection_.get_executor(), watch_loop(self), asio::detached);
    flush();  // the preface and SETTINGS
    steady_timer alarm(connection_.get_executor());
    alarm.expires_after(timeout);
    alarm.async_wait([self](boost::system::error_code ec) {
        if (!ec && !self->settled_.is_set()) self->close();  // no SETTINGS in time: not an HTTP/2 origin
    });
    co_await settled_.until_set();
    co_return !ended_;
}

std::shared_ptr<origin_stream> origin_session::open(std::string_view method, std::string_view scheme,
                                                    std::string_view authority, std::string_view path,
                                                    std::span<const field> fields, bool end_stream) {
    if (!accepts_streams()) return nullptr;
    const std::int32_t id = session_.request(method, scheme, authority, path, fields, end_stream);
    if (id <= 0) return nullptr;
    auto s = std::make_shared<origin_stream>(connection_.get_executor());
    s->id = id;
    s->uploading = !end_stream;
    uploading_ += s->uploading;
    streams_[id] = s;
    flush();
    return s;
}

void origin_session::send_body(origin_stream& s, std::span<const char> data, bool end,
                               std::span<const field> trailers) {
    if (s.closed) return;
    if (end) upload_done(s);
    session_.send_body(s.id, bytes_of(data), end, trailers);
    flush();
}

void origin_session::consumed(origin_stream& s, std::size_t n) {
    if (ended_ || n == 0) return;
    session_.consumed(s.id, n);
    if (session_.wants_write()) flush();  // a WINDOW_UPDATE is due: no writer for nothing
}

void origin_session::cancel(origin_stream& s) {
    if (s.closed || ended_) return;
    session_.reset(s.id, NGHTTP2_CANCEL);
    upload_done(s);
    // Its unread bytes, and whatever DATA is still on its way, go back to the window.
    if (!s.body.empty()) session_.consumed(s.id, s.body.size());
    s.body.clear();
    s.closed = true;
    s.error = NGHTTP2_CANCEL;
    streams_.erase(s.id);
    last_active_ = clock::now();
    flush();
}

void origin_session::close() {
    ctx_.h2_origins.forget(this);
    closed_ = true;
    watch_timer_.cancel();
    boost::system::error_code ignored;
    connection_.socket().close(ignored);  // the reader ends, and end() with it
}

void origin_session::upload_done(origin_stream& s) {
    if (std::exchange(s.uploading, false)) --uploading_;
}

origin_stream* origin_session::find(std::int32_t id) {
    const auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
}

void origin_session::on_response(std::int32_t stream, response_head head) {
    if (origin_stream* s = find(stream)) {
        s->body_ended = head.end_stream;
        s->head = std::move(head);
        s->changed.notify();
    }
}

void origin_session::on_body(std::int32_t stream, std::span<const std::uint8_t> data) {
    origin_stream* s = find(stream);
    if (!s) return session_.consumed(stream, data.size());  // nobody forwards it
    s->body.append(reinterpret_cast<const char*>(data.data()), data.size());
    s->changed.notify();
}

void origin_session::on_trailers(std::int32_t stream, std::vector<field> fields) {
    if (origin_stream* s = find(stream)) s->trailers = std::move(fields);
}

void origin_session::on_body_end(std::int32_t stream) {
    if (origin_stream* s = find(stream)) {
        s->body_ended = true;
        s->changed.notify();
    }
}

void origin_session::on_stream_closed(std::int32_t stream, std::uint32_t error_code) {
    const auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    origin_stream& s = *it->second;
    upload_done(s);
    s.closed = true;
    s.error = error_code;
    s.unprocessed = error_code == NGHTTP2_REFUSED_STREAM;
    s.changed.notify();
    streams_.erase(it);
    last_active_ = clock::now();
}

void origin_session::on_settings(std::optional<std::uint32_t> max_concurrent_streams) {
    std::optional<std::size_t> ceiling;
    if (max_concurrent_streams) ceiling = *max_concurrent_streams;
    ctx_.gates.set_stream_ceiling(key_, this, ceiling);
    settled_.set();
}

void origin_session::on_goaway(std::int32_t, std::uint32_t) {
    // No new stream here: the next request opens a new session. Streams the origin did
    // not process close with REFUSED_STREAM (unprocessed); the others run to their end.
    ctx_.h2_origins.forget(this);
}

void origin_session::flush() {
    if (writing_ || closed_) return;
    writing_ = true;
    asio::co_spawn(connection_.get_executor(), write_loop(shared_from_this()), asio::detached);
}

// The parameter keeps the session alive while the loop runs.
task<void> origin_session::write_loop(std::shared_ptr<origin_session>) {
    // After what is ready to run now: the frames of every stream it touches go in one write.
    co_await asio::post(connection_.get_executor(), asio::deferred);
    std::string& out = out_;
    for (;;) {
        out.clear();
        session_.produce(out);
        // Request bodies were framed: their streams may queue more.
        if (uploading_ > 0)
            for (auto& [id, s] : streams_)
                if (s->uploading) s->changed.notify();
        if (out.empty()) break;
        connection_.expires_after(idle_);  // an origin that stops reading is cut off after timeouts.idle
        auto [ec, n] = co_await send_all(connection_, asio::buffer(out));
        connection_.expires_never();
        if (ec) {
            close();
            break;
        }
    }
    settle_write_room(out, !streams_.empty());
    writing_ = false;
    if (ended_) close();
}

// The parameter keeps the session alive while the loop runs.
task<void> origin_session::read_loop(std::shared_ptr<origin_session>) {
    std::array<char, 16 * 1024> buffer;
    for (;;) {
        auto [ec, n] = co_await connection_.async_read_some(asio::buffer(buffer), use_tuple);
        if (ec) break;
        const bool more = session_.receive(bytes_of(std::span<const char>(buffer.data(), n)));
        if (!more) break;
        // A writer only with frames to send (a SETTINGS ACK, a WINDOW_UPDATE letting
        // uploads go on); end() below starts the one that closes.
        if (session_.wants_write()) flush();
    }
    end();
}

// While no stream is open: a PING at half of timeouts.idle (an origin that does not
// answer it is gone: the session closes at once, before a request would wait on it),
// and the session closes once it was idle for timeouts.idle.
// The parameter keeps the session alive while the loop runs.
task<void> origin_session::watch_loop(std::shared_ptr<origin_session>) {
    std::optional<std::uint64_t> ping_answers;  ///< pings_acked() when the PING outstanding went out
    while (!ended_) {
        watch_timer_.expires_after(std::max<clock::duration>(idle_ / 2, std::chrono::milliseconds(100)));
        co_await watch_timer_.async_wait(use_tuple);
        if (ended_ || closed_) break;
        if (!streams_.empty()) {
            ping_answers.reset();
            continue;
        }
        if (ping_answers && session_.pings_acked() == *ping_answers) {
            close();  // unanswered
            break;
        }
        if (clock::now() - last_active_ >= idle_) {
            close();
            break;
        }
        ping_answers = session_.pings_acked();
        session_.ping();
        flush();
    }
}

void origin_session::end() {
    ended_ = true;
    ctx_.h2_origins.forget(this);
    watch_timer_.cancel();
    // Its ceiling ends with it: an origin whose sessions are all gone (it went back to
    // HTTP/1.1, or took no streams at all) holds its host's requests no longer.
    ctx_.gates.forget_stream_ceiling(key_, this);
    settled_.set();
    for (auto& [id, s] : streams_) {
        upload_done(*s);
        s->closed = true;
        s->error = NGHTTP2_INTERNAL_ERROR;  // cut off
        s->changed.notify();
    }
    streams_.clear();
    flush();  // what is left to say (a GOAWAY), then the close
}

task<std::shared_ptr<origin_session>> open_origin_session(exchange_context& ctx, timed_socket connection,
                                                          const std::string& key, const std::string& pool_key,
                                                          const host_policy& policy, std::size_t max_header_bytes) {
    auto s = std::make_shared<origin_session>(ctx, std::move(connection), key, pool_key, policy.timeouts.idle,
                                              max_header_bytes);
    if (!co_await s->start(policy.timeouts.connect)) co_return nullptr;
    auto chosen = ctx.h2_origins.adopt(pool_key, s);
    if (chosen != s) s->close();
    co_return chosen;
}

task<std::shared_ptr<origin_session>> origin_sessions::find(const std::string& pool_key) {
    for (;;) {
        if (auto now = find_now(pool_key)) co_return std::move(*now);
        const std::shared_ptr<event> opening = origins_.find(pool_key)->second.opening;
        co_await opening->wait();  // set when that attempt ended, whichever way
    }
}

std::optional<std::shared_ptr<origin_session>> origin_sessions::find_now(const std::string& pool_key) const {
    const auto it = origins_.find(pool_key);
    if (it == origins_.end()) return nullptr;
    if (it->second.session && it->second.session->accepts_streams()) return it->second.session;
    if (!it->second.opening) return nullptr;
    return std::nullopt;
}

origin_sessions::opening_mark origin_sessions::opening(const std::string& pool_key, bool may_h2, bool h2c,
                                                        const executor& ex) {
    if (!may_h2) return {};
    const auto it = origins_.find(pool_key);
    const bool known = h2c || (it != origins_.end() && it->second.picked_h2);
    if (!known || (it != origins_.end() && it->second.opening)) return {};
    if (origins_.size() >= max_remembered) std::erase_if(origins_, [](const auto& kv) { return !kv.second.session && !kv.second.opening; });
    auto done = std::make_shared<event>(ex);
    origins_[pool_key].opening = done;
    return opening_mark(*this, pool_key, std::move(done));
}

origin_sessions::opening_mark::~opening_mark() {
    if (!owner_) return;
    if (const auto it = owner_->origins_.find(pool_key_); it != owner_->origins_.end() && it->second.opening == done_)
        it->second.opening.reset();
    done_->set();
}

std::shared_ptr<origin_session> origin_sessions::adopt(const std::string& pool_key, std::shared_ptr<origin_session> s) {
    origin& o = origins_[pool_key];
    o.picked_h2 = true;
    if (o.session && o.session->accepts_streams()) return o.session;
    o.session = std::move(s);
    return o.session;
}

void origin_sessions::forget(const origin_session* s) {
    if (const auto it = origins_.find(s->pool_key()); it != origins_.end() && it->second.session.get() == s)
        it->second.session.reset();
}

void origin_sessions::close_all() {
    auto all = std::move(origins_);
    origins_.clear();
    for (auto& [key, o] : all)
        if (o.session) o.session->close();
}

}  // namespace politeproxy
