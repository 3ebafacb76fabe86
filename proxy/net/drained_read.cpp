#include "politeproxy/net/drained_read.hpp"

#include <boost/asio/error.hpp>

#include <cerrno>
#include <cstring>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace politeproxy {

void ask_inq(int fd, drain_marks& marks) {
    const int on = 1;
    marks.inq_asked = ::setsockopt(fd, IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0;  // not yet open: asked again
}

bool receive_now(int fd, boost::asio::mutable_buffer b, int flags, drain_marks& marks,
                 boost::system::error_code& ec, std::size_t& n) {
    ::iovec iov{b.data(), b.size()};
    alignas(::cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    ::msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ::ssize_t got;
    do {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        got = ::recvmsg(fd, &msg, flags | MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    n = 0;
    marks.drained = false;  // after an end or an error, Asio's own mark (a read of 0 bytes)
    if (got < 0) {
        ec.assign(errno, boost::asio::error::get_system_category());
        return true;
    }
    if (got == 0) {
        ec = boost::asio::error::eof;
        return true;
    }
    ec.clear();
    n = static_cast<std::size_t>(got);
    marks.written = false;
    for (::cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != IPPROTO_TCP || c->cmsg_type != TCP_CM_INQ) continue;
        int queued;
        std::memcpy(&queued, CMSG_DATA(c), sizeof queued);
        marks.drained = queued == 0 && !marks.off;  // 1 once a FIN waits
    }
    return true;
}

}  // namespace politeproxy
