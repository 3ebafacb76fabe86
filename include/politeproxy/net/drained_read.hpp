#pragma once
// TCP reads that tell Asio's reactor when they emptied the socket.
//
// Asio attempts every read at once (a "speculative" recv()) unless the socket is marked
// exhausted; then the read waits for the next readiness event, which also clears the
// mark. Asio 1.81 marks a socket so after a short write and after a read of 0 bytes (end
// of stream), not after a read that emptied it. So a proxy that reads a request, answers
// it and reads again pays a recv() that fails with EAGAIN for every read whose bytes
// cannot be there yet: the client's next request, the origin's response, the pooled
// connection's watch. HAProxy marks its descriptor after such a read (fd_cant_recv) and
// makes one recv() per read.
//
// A read into a `drained_read_buffer` does the same, and knows it emptied the socket
// from the kernel, not from its length: each recvmsg() asks for TCP_INQ's count of the
// bytes still queued, which is 1, not 0, once a FIN came (a read that ended just before
// the FIN emptied nothing). Asio offers no call to mark a socket: its receive operation,
// specialized below for this buffer type, says so by what it returns, and the reactor
// sets the mark under the descriptor's lock in the same step as the recvmsg().
//
// What the mark cannot see: a reset that came before the read that emptied the socket
// (its readiness spent, its error left for the next read). The next read would wait for
// its deadline. So timed_socket trusts the mark only once it has written to the socket
// since (a write fails on a reset connection) or for the pooled connection's watch
// (the request's write then fails: it is sent again on a new connection when it may be,
// and answered 502 otherwise); any other read after one that emptied the socket is
// attempted at once by timed_socket itself (`receive_now`), and the reactor's own
// attempt is then spared (`known_empty`). Like the socket, the marks belong to the one
// thread that runs its io_context.
//
// This specializes Asio 1.81's internals (the epoll reactor's receive operation): a
// Boost of another version fails the build here, to be checked against its reactor.

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <boost/version.hpp>

#include <cstddef>

static_assert(BOOST_VERSION == 108100, "drained_read.hpp specializes Asio 1.81's receive operation: check it");
#if defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT) || defined(BOOST_ASIO_HAS_IOCP)
#error "drained_read.hpp specializes the epoll reactor's receive operation"
#endif

namespace politeproxy {

/// What the reads and writes of one TCP connection tell about its receive queue.
struct drain_marks {
    bool drained = false;      ///< the last read emptied the socket, and no FIN was waiting
    bool written = false;      ///< a write went out since that read
    bool inq_asked = false;    ///< TCP_INQ is on (asked once per connection)
    bool known_empty = false;  ///< a recvmsg() just found nothing: the reactor's attempt is spared
    bool off = false;          ///< never marked (HTTP/2: timed_socket::read_unmarked)
};

/// One buffer to read into from a TCP socket: a read that empties the socket marks it
/// exhausted in Asio's reactor and in `marks`.
struct drained_read_buffer : boost::asio::mutable_buffer {
    drained_read_buffer(boost::asio::mutable_buffer b, drain_marks& m) noexcept
        : boost::asio::mutable_buffer(b), marks(&m) {}
    drain_marks* marks;
};

/// Turns on TCP_INQ for `fd` (marks.inq_asked once it took). Without it nothing is marked.
void ask_inq(int fd, drain_marks& marks);

/// One recvmsg() into `b` without waiting. False when it would block; otherwise `ec` and
/// `n` say what came (end of stream is boost::asio::error::eof) and `marks.drained`
/// whether the socket is now empty.
bool receive_now(int fd, boost::asio::mutable_buffer b, int flags, drain_marks& marks,
                 boost::system::error_code& ec, std::size_t& n);

}  // namespace politeproxy

#include <boost/asio/socket_base.hpp>  // before the operation, which needs it
#include <boost/asio/detail/reactive_socket_recv_op.hpp>

namespace boost::asio::detail {

template <>
class reactive_socket_recv_op_base<politeproxy::drained_read_buffer> : public reactor_op {
public:
    reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                                 socket_ops::state_type, const politeproxy::drained_read_buffer& buffer,
                                 socket_base::message_flags flags, func_type complete_func)
        : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
          socket_(socket),
          buffer_(buffer),
          flags_(flags) {}

    static status do_perform(reactor_op* base) {
        auto* o = static_cast<reactive_socket_recv_op_base*>(base);
        if (o->buffer_.marks->known_empty) return not_done;  // only while timed_socket starts it
        if (!politeproxy::receive_now(o->socket_, o->buffer_, o->flags_, *o->buffer_.marks, o->ec_,
                                      o->bytes_transferred_))
            return not_done;
        // Asio's own rule, end of stream or an error, and the kernel's word that it is empty.
        return o->bytes_transferred_ == 0 || o->buffer_.marks->drained ? done_and_exhausted : done;
    }

private:
    socket_type socket_;
    politeproxy::drained_read_buffer buffer_;
    socket_base::message_flags flags_;
};

}  // namespace boost::asio::detail
