#pragma once
#include "politeproxy/base/clock.hpp"

#include "politeproxy/net/timed_socket.hpp"

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace politeproxy {

/// Idle keep-alive connections to origins, keyed by "host:port". A connection is
/// handed out to one request at a time. Nothing may arrive on a pooled connection: it is
/// parked only with nothing unread, and watched while it waits (timed_socket::watch_idle):
/// a byte or a close from the origin spoils it, and a spoiled connection is never handed
/// out. The watch goes on after take() until the caller has written its request and calls
/// unwatch(): whatever the origin sent before that answers no request. Bounded per origin
/// and in total, and each expires after the lifetime it was parked with.
///
/// Each worker thread has its own pool: a socket belongs to the event loop it was opened
/// on. Thread safety: members lock, so the admin listener may read idle_count() from
/// another thread.
class origin_pool {
public:
    static constexpr std::size_t max_idle_per_origin = 1024;
    static constexpr std::size_t max_idle_total = 4096;

    /// An unspoiled idle connection to `origin`, if there is one, still watched: the
    /// caller calls unwatch() once its request is written, and must not use it as a
    /// response if that says false. No system call.
    std::optional<timed_socket> take(const std::string& origin);

    /// Parks a connection whose last response was read completely, for `lifetime`; one
    /// with anything unread is closed instead.
    void put(const std::string& origin, timed_socket connection, clock::duration lifetime);

    /// Closes expired connections and spoiled ones.
    void sweep(clock::time_point now);

    /// Closes every idle connection.
    void clear();

    std::size_t idle_count() const;

private:
    struct idle_connection {
        timed_socket connection;
        clock::time_point expires;
    };

    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::deque<idle_connection>> idle_;
    std::size_t count_ = 0;
};

}  // namespace politeproxy
