#pragma once
#include "politeproxy/base/clock.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/drained_read.hpp"
#include <boost/beast/core/error.hpp>

#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace politeproxy {

namespace tls {
class session;
}

/// A TCP socket with a deadline, as beast::tcp_stream has one, at the price of storing
/// a time point per operation rather than arming a timer per operation.
///
/// `expires_after`/`expires_at` set the deadline for the operations that follow and for
/// those pending (a connection that goes idle while a read waits is timed from then); when
/// it passes with an operation pending, the socket is closed and the operation fails
/// with beast::error::timeout (as does one started after it passed, unless it can
/// complete at once). Operations started on socket() directly (a wait for readability)
/// and the watch (watch()) are not timed, and not cancelled by a deadline that passes
/// while none of this object's operations is pending. One watchdog timer per socket
/// fires no later than the deadline; when the deadline has moved on (it usually has:
/// every request pushes it forward), it goes back to sleep until the new one. So a busy connection costs one
/// timer wake-up per timeout period, not two timer operations per read or write.
///
/// Reads and writes go to the socket with the caller's buffers unchanged, so a single
/// buffer is one send()/recv(); once TLS is started on it (tls/session.hpp) they go
/// through the TLS session, one buffer at a time. A read into one buffer that empties the
/// socket spares the next read its recv() until readiness (net/drained_read.hpp). Models
/// Asio's AsyncReadStream and AsyncWriteStream.
///
/// Thread safety: as a socket; use it from its executor (a single-threaded loop). Like
/// any Asio I/O object it must outlive the handlers of its pending operations.
class timed_socket {
    struct state;

public:
    using socket_type = tcp_socket;
    using executor_type = socket_type::executor_type;

    explicit timed_socket(socket_type socket);
    explicit timed_socket(const executor_type& ex);
    timed_socket(timed_socket&&) noexcept = default;
    timed_socket& operator=(timed_socket&&) noexcept;
    ~timed_socket();

    executor_type get_executor() noexcept { return state_->socket.get_executor(); }
    socket_type& socket() { return state_->socket; }

    void expires_after(clock::duration d) { expires_at(clock::now() + d); }
    void expires_at(clock::time_point deadline);
    void expires_never();


    /// Cancels pending operations (they end with operation_aborted).
    void cancel();

    /// When a deadline passes, cancel the pending operations (they end with
    /// beast::error::timeout) but keep the connection open, so the caller can still
    /// answer it (408 to a client that stalled). By default a timed-out socket is closed.
    void keep_open_on_timeout() { state_->close_on_timeout = false; }

    template <class MutableBufferSequence, class ReadToken>
    auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
        return boost::asio::async_initiate<ReadToken, void(boost::system::error_code, std::size_t)>(
            [](auto handler, state* s, const MutableBufferSequence& b) {
                if (s->tls)
                    tls_read_some(*s, first_buffer<boost::asio::mutable_buffer>(b), std::move(handler));
                else
                    read_after_watch(*s, b, std::move(handler));
            },
            token, state_.get(), buffers);
    }

    template <class ConstBufferSequence, class WriteToken>
    auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
        return boost::asio::async_initiate<WriteToken, void(boost::system::error_code, std::size_t)>(
            [](auto handler, state* s, const ConstBufferSequence& b) {
                if (s->tls)
                    tls_write_some(*s, first_buffer<boost::asio::const_buffer>(b), std::move(handler));
                else
                    start_write(*s, b, std::move(handler));
            },
            token, state_.get(), buffers);
    }

    /// Writes what the socket takes at once, without waiting and without a trip through
    /// the event loop: one send(), or one sendmsg() for several buffers. Returns the
    /// bytes written (0 when the socket's send buffer is full, and always over TLS, whose
    /// records its session writes); `ec` is set on any other failure. See send_all().
    template <class ConstBufferSequence>
    std::size_t write_now(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
        ec.clear();
        if (state_->tls) return 0;  // TLS records are written by its session, asynchronously
        std::array<::iovec, max_write_now_buffers> iov;
        std::size_t count = 0;
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers) && count < iov.size(); ++it) {
            const boost::asio::const_buffer b(*it);
            if (b.size() > 0) iov[count++] = ::iovec{const_cast<void*>(b.data()), b.size()};
        }
        return write_now(iov.data(), count, ec);
    }

    /// For a connection that carries many exchanges at once (HTTP/2): a read that emptied
    /// it says nothing of when the next bytes come, and an attempt at once often finds
    /// them. Its reads from now on are attempted at once, as Asio does, and mark nothing.
    void read_unmarked() { state_->drain.off = true; }
    /// Whether the last read emptied the socket, as the kernel's TCP_INQ count told it
    /// (net/drained_read.hpp): the next may wait for readiness without a recv() first.
    bool read_emptied() const { return state_->drain.drained; }

    /// Whether reads and writes go through TLS (tls/session.hpp starts it).
    bool secure() const { return state_->tls != nullptr; }

    /// Watches a reused connection on which the peer is to send nothing until its
    /// request is written whole: a one-byte MSG_PEEK receive (what it finds stays unread)
    /// queued in the reactor. Asio attempts it at once, unless the last read emptied the
    /// socket (as TCP_INQ told it, net/drained_read.hpp): then it waits for the readiness that
    /// bytes or a close coming later raise. A read started while the watch is queued
    /// queues behind it with no attempt of its own, and ends the watch. What an attempt
    /// at once found is reported once the event loop has run what was queued before
    /// it (one thread per io_context: a posted continuation runs after it). A close or an
    /// error the watch hears closes the connection at once (Asio would not attempt the
    /// next read, and no readiness is to come), so no operation waits on a dead one.
    void watch();
    /// Whether the watch found bytes, a close or an error before a read ended it.
    bool heard() const { return state_->heard; }
    /// Whether what it found was a close or an error (the connection is closed).
    bool heard_close() const { return state_->heard_close; }
    /// Whether the TLS session holds bytes nobody read (none without TLS).
    bool holds_unread();

    /// The connection's bytes as they are on the wire, under its deadline: what a TLS
    /// session reads its records from and writes them to. Models AsyncReadStream and
    /// AsyncWriteStream, and is valid as long as the timed_socket.
    class wire {
    public:
        using executor_type = timed_socket::executor_type;
        using lowest_layer_type = socket_type::lowest_layer_type;
        explicit wire(timed_socket& t) : s_(t.state_.get()) {}
        executor_type get_executor() noexcept { return s_->socket.get_executor(); }
        lowest_layer_type& lowest_layer() { return s_->socket.lowest_layer(); }
        template <class MutableBufferSequence, class ReadToken>
        auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
            return boost::asio::async_initiate<ReadToken, void(boost::system::error_code, std::size_t)>(
                [](auto handler, state* s, const MutableBufferSequence& b) {
                    read_after_watch(*s, b, std::move(handler));
                },
                token, s_, buffers);
        }
        template <class ConstBufferSequence, class WriteToken>
        auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
            return boost::asio::async_initiate<WriteToken, void(boost::system::error_code, std::size_t)>(
                [](auto handler, state* s, const ConstBufferSequence& b) { start_write(*s, b, std::move(handler)); },
                token, s_, buffers);
        }

    private:
        state* s_;
    };

    /// Connects to the first of `endpoints` that accepts, as asio::async_connect does.
    template <class EndpointSequence, class ConnectToken>
    auto async_connect(const EndpointSequence& endpoints, ConnectToken&& token) {
        using endpoint = boost::asio::ip::tcp::endpoint;
        return boost::asio::async_initiate<ConnectToken, void(boost::system::error_code, endpoint)>(
            [](auto handler, state* s, const EndpointSequence& e) {
                boost::asio::async_connect(s->socket, e, watched(*s, std::move(handler)));
            },
            token, state_.get(), endpoints);
    }

    /// Completion handler wrapper: counts the operation as pending for the watchdog and
    /// turns the watchdog's cancellation into beast::error::timeout. Keeps the wrapped
    /// handler's associations (executor, allocator, cancellation slot): see the
    /// associator below.
    template <class Handler>
    struct timeout_report {
        Handler handler;
        state* s;

        template <class Result>
        void operator()(boost::system::error_code ec, Result result) {
            --s->pending;
            if (ec == boost::asio::error::operation_aborted && s->timed_out) ec = boost::beast::error::timeout;
            std::move(handler)(ec, std::move(result));
        }
    };

private:
    friend class tls::session;
    using io_handler = boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)>;
    // Through the TLS session (defined with it, in proxy/tls/session.cpp).
    static void tls_read_some(state& s, boost::asio::mutable_buffer b, io_handler handler);
    static void tls_write_some(state& s, boost::asio::const_buffer b, io_handler handler);
    // Bytes the TLS session took from the wire and nobody has read yet.
    static bool tls_holds_unread(state& s);

    // A read, queued behind the watch (if one runs) before that ends. One buffer is read
    // as a drained_read_buffer (net/drained_read.hpp): after a read that emptied the
    // socket, the next waits for readiness without an attempt at once if a write went
    // out since or the watch runs; otherwise it is attempted here, once.
    template <class MutableBufferSequence, class Handler>
    static void read_after_watch(state& s, const MutableBufferSequence& b, Handler handler) {
        if constexpr (std::is_convertible_v<const MutableBufferSequence*, const boost::asio::mutable_buffer*>) {
            drain_marks& d = s.drain;
            if (d.drained && !d.written && !s.watching && b.size() > 0) {
                boost::system::error_code ec;
                std::size_t n = 0;
                if (receive_now(s.socket.native_handle(), b, 0, d, ec, n)) {
                    complete_later(s, io_handler(std::move(handler)), ec, n);
                    return;
                }
                d.known_empty = true;  // the reactor's attempt, if it makes one, would find nothing
            }
            if (!d.inq_asked && !d.off) ask_inq(s.socket.native_handle(), d);
            struct spared {
                bool& known_empty;
                ~spared() { known_empty = false; }  // once started, the operation reads
            } started{d.known_empty};
            s.socket.async_read_some(drained_read_buffer(b, d), watched(s, std::move(handler)));
        } else {
            s.socket.async_read_some(b, watched(s, std::move(handler)));
        }
        if (s.watching) stop_watch(s);
    }
    static void stop_watch(state& s);
    // Posts what a read found at once, as Asio does for a read its first attempt completes.
    static void complete_later(state& s, io_handler handler, boost::system::error_code ec, std::size_t n);
    template <class ConstBufferSequence, class Handler>
    static void start_write(state& s, const ConstBufferSequence& b, Handler handler) {
        // A reset connection fails it: the next read may wait unattempted.
        if (boost::asio::buffer_size(b) > 0) s.drain.written = true;
        s.socket.async_write_some(b, watched(s, std::move(handler)));
    }
    void end_watch() {
        if (state_->watching) stop_watch(*state_);
    }

    // A TLS session reads or writes one buffer at a time: the sequence's first non-empty one.
    template <class Buffer, class Sequence>
    static Buffer first_buffer(const Sequence& buffers) {
        for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it)
            if (Buffer(*it).size() > 0) return Buffer(*it);
        return Buffer();
    }

    static constexpr std::size_t max_write_now_buffers = 8;
    std::size_t write_now(const ::iovec* iov, std::size_t count, boost::system::error_code& ec);

    struct state : std::enable_shared_from_this<state> {
        explicit state(socket_type s);
        socket_type socket;
        steady_timer watchdog;
        clock::time_point deadline = clock::time_point::max();
        clock::time_point alarm = clock::time_point::max();  ///< when the watchdog fires; max: not armed
        std::uint64_t generation = 0;                         ///< of the armed wait; older ones are void
        unsigned pending = 0;  ///< operations started through this object, not yet complete
        bool timed_out = false;
        bool close_on_timeout = true;
        drain_marks drain;         ///< what the last read and write said of the receive queue
        bool watching = false;     ///< the watch's receive may be queued
        bool heard = false;        ///< the watch's receive found bytes, a close or an error
        bool heard_close = false;  ///< a close or an error
        std::uint32_t watch = 0;   ///< of the current watch; a stale receive's completion is void
        char peeked = 0;           ///< the watch's receive buffer (MSG_PEEK: the byte stays unread)
        boost::asio::cancellation_signal watch_cancel;  ///< ends the watch's receive alone
        std::shared_ptr<tls::session> tls;  ///< set once TLS is started on the connection
    };

    template <class Handler>
    static timeout_report<Handler> watched(state& s, Handler handler) {
        ++s.pending;
        arm(s);
        return {std::move(handler), &s};
    }
    static void arm(state& s);
    static void on_alarm(const std::shared_ptr<state>& s, std::uint64_t generation, boost::system::error_code ec);

    std::shared_ptr<state> state_;  ///< shared with the watchdog's pending wait
};

}  // namespace politeproxy

namespace boost::asio {

template <template <typename, typename> class Associator, typename Handler, typename DefaultCandidate>
struct associator<Associator, politeproxy::timed_socket::timeout_report<Handler>, DefaultCandidate> {
    using type = typename Associator<Handler, DefaultCandidate>::type;

    static type get(const politeproxy::timed_socket::timeout_report<Handler>& h) noexcept {
        return Associator<Handler, DefaultCandidate>::get(h.handler);
    }
    static auto get(const politeproxy::timed_socket::timeout_report<Handler>& h, const DefaultCandidate& c) noexcept
        -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
        return Associator<Handler, DefaultCandidate>::get(h.handler, c);
    }
};

}  // namespace boost::asio
