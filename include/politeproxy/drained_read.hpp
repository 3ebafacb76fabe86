#pragma once
// A socket read that tells Asio's reactor when it emptied the socket.
//
// Asio's epoll reactor tries every new read at once ("speculatively") before it waits
// for readiness. A proxy starts most reads when no data can be there yet (the response
// right after the request was sent, the next request right after a response), so each
// such read costs a recv() that fails with EAGAIN: one system call in three on the
// pass-through path, where system calls are the largest cost. The reactor already knows
// how to skip that attempt: an operation that reports "done and exhausted" makes the
// next read wait for the next readiness edge (Asio reports it for end of stream only).
// This read reports it when the kernel says nothing is left to read: the socket has
// TCP_INQ on, so recvmsg() returns the bytes still queued, and a FIN not yet read counts
// as one (Linux's tcp_inq_hint), so a close that came with the data is not missed. Data
// or a FIN that arrives later raises a new edge, which turns speculation back on before
// the waiting read is tried. Without TCP_INQ (kernels before 4.18) reads are Asio's own.
//
// One event is not covered: a reset that arrived together with the last data. recv()
// reports the data and leaves the error for the next call, and TCP_INQ says 0, so the
// next read on that socket waits for its deadline (every read the proxy makes has one)
// instead of failing at once. It ends in an error either way.
//
// It reaches into Asio's detail namespace (the operation type, the reactor, the socket's
// implementation), so it is written for the Boost of Debian 12 and checked against it at
// compile time; with any other Boost, and for reads that carry a per-operation
// cancellation slot (awaitable operators), it is the plain async_read_some.

#include "politeproxy/executor.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/buffer_sequence_adapter.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/version.hpp>

#include <cerrno>
#include <cstring>
#include <utility>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define POLITEPROXY_DRAINED_READ 1
#else
#define POLITEPROXY_DRAINED_READ 0
#endif

namespace politeproxy {

#if POLITEPROXY_DRAINED_READ
namespace drained_read_detail {

namespace ad = boost::asio::detail;

/// Whether recvmsg() said, in its TCP_CM_INQ control message, that nothing is queued.
inline bool nothing_queued(::msghdr& msg) {
    for (::cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ) {
            int queued;
            std::memcpy(&queued, CMSG_DATA(c), sizeof queued);
            return false;  // no answer: assume there is more2
        }
    }
    return false;  // no answer: assume there is more
}

/// Asio's reactive_socket_recv_op, except for what perform() reports (see above).
template <class Buffers, class Handler, class IoExecutor>
class recv_op : public ad::reactor_op {
public:
    BOOST_ASIO_DEFINE_HANDLER_PTR(recv_op);

    recv_op(ad::socket_type socket, const Buffers& buffers, Handler& handler, const IoExecutor& io_ex)
        : reactor_op(boost::system::error_code(), &recv_op::do_perform, &recv_op::do_complete),
          socket_(socket),
          buffers_(buffers),
          handler_(std::move(handler)),
          work_(handler_, io_ex) {}

    static status do_perform(reactor_op* base) {
        auto* o = static_cast<recv_op*>(base);
        ad::buffer_sequence_adapter<boost::asio::mutable_buffer, Buffers> bufs(o->buffers_);
        alignas(::cmsghdr) char control[CMSG_SPACE(sizeof(int))];
        ::msghdr msg{};
        msg.msg_iov = bufs.buffers();
        msg.msg_iovlen = bufs.count();
        for (;;) {
            msg.msg_control = control;
            msg.msg_controllen = sizeof control;
            const ::ssize_t n = ::recvmsg(o->socket_, &msg, 0);
            if (n > 0) {
                o->ec_ = {};
                o->bytes_transferred_ = static_cast<std::size_t>(n);
                return nothing_queued(msg) ? done_and_exhausted : done;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return not_done;  // wait for readiness
            o->ec_ = n == 0 ? boost::system::error_code(boost::asio::error::eof)
                            : boost::system::error_code(errno, boost::asio::error::get_system_category());
            o->bytes_transferred_ = 0;
            return done_and_exhausted;  // as Asio's own read after the end of the stream
        }
    }

    static void do_complete(void* owner, ad::operation* base, const boost::system::error_code&, std::size_t) {
        auto* o = static_cast<recv_op*>(base);
        ptr p = {boost::asio::detail::addressof(o->handler_), o, o};
        ad::handler_work<Handler, IoExecutor> w(std::move(o->work_));
        // The handler is moved out so the operation's memory is freed before the upcall.
        ad::binder2<Handler, boost::system::error_code, std::size_t> handler(o->handler_, o->ec_,
                                                                              o->bytes_transferred_);
        p.h = boost::asio::detail::addressof(handler.handler_);
        p.reset();
        if (owner) {  // null when the loop is destroyed with the read pending
            ad::fenced_block b(ad::fenced_block::half);
            w.complete(handler, handler.handler_);
        }
    }

private:
    ad::socket_type socket_;
    Buffers buffers_;
    Handler handler_;
    ad::handler_work<Handler, IoExecutor> work_;
};

/// The socket's implementation is a protected member of basic_socket; a pointer to it
/// named through a derived class is the standard's way to reach it.
struct socket_access : tcp_socket {
    static constexpr auto impl = &socket_access::impl_;
};

}  // namespace drained_read_detail

/// What async_read_drained keeps per socket: its loop's reactor (looked up once, not
/// per read) and which descriptor has TCP_INQ on.
class drained_reads {
public:
    explicit drained_reads(tcp_socket& socket)
        : reactor_(&boost::asio::use_service<boost::asio::detail::reactor>(
              static_cast<boost::asio::execution_context&>(
                  boost::asio::query(socket.get_executor(), boost::asio::execution::context)))) {}

    /// socket.async_read_some(buffers, handler), except that a read that empties the
    /// socket makes the next one wait for readiness instead of trying recv() first.
    template <class MutableBufferSequence, class Handler>
    void async_read_some(tcp_socket& socket, const MutableBufferSequence& buffers, Handler&& handler) {
        namespace ad = boost::asio::detail;
        using op = drained_read_detail::recv_op<MutableBufferSequence, std::decay_t<Handler>,
                                                tcp_socket::executor_type>;
        using bufs_type = ad::buffer_sequence_adapter<boost::asio::mutable_buffer, MutableBufferSequence>;
        auto& impl = (socket.*drained_read_detail::socket_access::impl).get_implementation();
        if (boost::asio::get_associated_cancellation_slot(handler).is_connected() || bufs_type::all_empty(buffers) ||
            !inq_on(impl.socket_)) {
            socket.async_read_some(buffers, std::forward<Handler>(handler));
            return;
        }
        const bool is_continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
        typename op::ptr p = {boost::asio::detail::addressof(handler), op::ptr::allocate(handler), 0};
        p.p = new (p.v) op(impl.socket_, buffers, handler, socket.get_executor());
        if ((impl.state_ & ad::socket_ops::non_blocking) ||
            ad::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true, p.p->ec_))
            reactor_->start_op(ad::reactor::read_op, impl.socket_, impl.reactor_data_, p.p, is_continuation, true);
        else
            reactor_->post_immediate_completion(p.p, is_continuation);
        p.v = p.p = 0;
    }

private:
    // Turns TCP_INQ on for a descriptor the first time it is read. A descriptor number
    // reused by another socket is harmless: without the option no control message
    // comes back, and a read without one never reports the socket empty.
    bool inq_on(int fd) {
        if (fd != inq_fd_) {
            const int on = 1;
            inq_fd_ = fd;
            inq_ = fd >= 0 && ::setsockopt(fd, SOL_TCP, TCP_INQ, &on, sizeof on) == 0;
        }
        return inq_;
    }

    boost::asio::detail::reactor* reactor_;
    int inq_fd_ = -1;
    bool inq_ = false;
};

#else

class drained_reads {
public:
    explicit drained_reads(tcp_socket&) {}
    template <class MutableBufferSequence, class Handler>
    void async_read_some(tcp_socket& socket, const MutableBufferSequence& buffers, Handler&& handler) {
        socket.async_read_some(buffers, std::forward<Handler>(handler));
    }
};

#endif

}  // namespace politeproxy
