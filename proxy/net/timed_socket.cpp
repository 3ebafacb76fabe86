#include "politeproxy/net/timed_socket.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>

#include <cerrno>

#include <sys/socket.h>

namespace politeproxy {

timed_socket::state::state(socket_type s) : socket(std::move(s)), watchdog(socket.get_executor()) {}

timed_socket::timed_socket(socket_type socket) : state_(std::make_shared<state>(std::move(socket))) {}

timed_socket::timed_socket(const executor_type& ex) : timed_socket(socket_type(ex)) {}

timed_socket& timed_socket::operator=(timed_socket&& other) noexcept {
    if (this != &other) {
        timed_socket gone(std::move(*this));  // closes what this held
        state_ = std::move(other.state_);
    }
    return *this;
}

timed_socket::~timed_socket() {
    if (!state_) return;  // moved from
    state_->watchdog.cancel();
    boost::system::error_code ignored;
    state_->socket.close(ignored);
}

void timed_socket::expires_at(clock::time_point deadline) {
    state& s = *state_;
    s.deadline = deadline;
    s.timed_out = false;
    // A pending operation's deadline came closer (or it had none): the watchdog wakes by then.
    if (s.pending > 0 && deadline < s.alarm) arm(s);
}

void timed_socket::expires_never() {
    state_->deadline = clock::time_point::max();
    state_->timed_out = false;
}

void timed_socket::cancel() { state_->socket.cancel(); }

void timed_socket::watch() {
    state& s = *state_;
    end_watch();  // a receive still queued would take the new one's attempt
    s.watching = true;
    s.heard = false;
    s.heard_close = false;
    const std::uint32_t id = ++s.watch;
    s.socket.async_receive(
        boost::asio::buffer(&s.peeked, 1), socket_type::message_peek,
        boost::asio::bind_cancellation_slot(s.watch_cancel.slot(), [self = s.shared_from_this(), id](
                                                                       boost::system::error_code ec, std::size_t) {
            state& st = *self;
            if (st.watch != id) return;  // a later watch runs
            st.watching = false;
            if (ec == boost::asio::error::operation_aborted) return;  // ended by a read, or closed
            st.heard = true;
            if (!ec) return;  // bytes, left unread
            // A close or an error: Asio now attempts no read until readiness that will not
            // come, so one queued or started later would wait out its deadline. Closed, it
            // fails at once.
            st.heard_close = true;
            boost::system::error_code ignored;
            st.socket.close(ignored);
        }));
}

void timed_socket::stop_watch(state& s) {
    s.watching = false;
    // Cancels this receive only (a read may be queued behind it), if it is still queued;
    // one the loop completed already reports what it found.
    s.watch_cancel.emit(boost::asio::cancellation_type::total);
}

void timed_socket::complete_later(state& s, io_handler handler, boost::system::error_code ec, std::size_t n) {
    boost::asio::post(s.socket.get_executor(), boost::asio::append(std::move(handler), ec, n));
}

bool timed_socket::holds_unread() {
    state& s = *state_;
    return s.tls && tls_holds_unread(s);
}

std::size_t timed_socket::write_now(const ::iovec* iov, std::size_t count, boost::system::error_code& ec) {
    ec.clear();
    if (count == 0) return 0;
    const int fd = state_->socket.native_handle();
    constexpr int flags = MSG_DONTWAIT | MSG_NOSIGNAL;
    ::ssize_t n;
    do {
        if (count == 1) {
            n = ::send(fd, iov[0].iov_base, iov[0].iov_len, flags);
        } else {
            ::msghdr msg{};
            msg.msg_iov = const_cast<::iovec*>(iov);
            msg.msg_iovlen = count;
            n = ::sendmsg(fd, &msg, flags);
        }
    } while (n < 0 && errno == EINTR);
    if (n > 0) state_->drain.written = true;
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EAGAIN && errno != EWOULDBLOCK) ec.assign(errno, boost::system::system_category());
    return 0;
}

void timed_socket::arm(state& s) {
    // Armed no later than the deadline already (or no deadline): nothing to do.
    if (s.deadline == clock::time_point::max() || s.alarm <= s.deadline) return;
    s.alarm = s.deadline;
    const std::uint64_t generation = ++s.generation;
    s.watchdog.expires_at(s.deadline);  // a wait for a later alarm ends, void
    // The wait holds the state: the timer must outlive its own handler.
    s.watchdog.async_wait([self = s.shared_from_this(), generation](boost::system::error_code ec) {
        on_alarm(self, generation, ec);
    });
}

void timed_socket::on_alarm(const std::shared_ptr<state>& self, std::uint64_t generation, boost::system::error_code ec) {
    state& s = *self;
    if (generation != s.generation) return;  // re-armed meanwhile: a newer wait is pending
    s.alarm = clock::time_point::max();
    if (ec || s.deadline == clock::time_point::max() || s.pending == 0) return;
    if (clock::now() < s.deadline) {
        arm(s);  // the deadline moved on: sleep until the new one
        return;
    }
    // Closed, as beast::tcp_stream does: a cancelled connect would go on to the next
    // address with no deadline, and a connection that timed out is not used again.
    // Unless the owner still has something to say on it (keep_open_on_timeout).
    s.timed_out = true;
    boost::system::error_code ignored;
    if (s.close_on_timeout)
        s.socket.close(ignored);
    else
        s.socket.cancel(ignored);
}

}  // namespace politeproxy
