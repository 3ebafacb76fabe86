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
/// handed out to one request at a time. Nothing may arrive on a pooled connection: what
/// an origin sent while it was idle (bytes behind a bodiless response, a close) answers
/// no request. take() leaves out connections whose TLS session holds such bytes; the
/// caller checks the socket itself with timed_socket::watch() before writing to it (a
/// check that costs no system call of its own). Bounded per origin and in total, and
/// each expires after the lifetime it was parked with.
///
/// Each worker thread has its own pool: a socket belongs to the event loop it was opened
/// on. Thread safety: members lock, so the admin listener may read idle_count() from
/// another thread.
class origin_pool {
public:
    static constexpr std::size_t max_idle_per_origin = 1024;
    static constexpr std::size_t max_idle_total = 4096;

    /// An idle connection to `origin`, if there is one: the most recently parked that has
    /// not expired and whose TLS session holds nothing unread (the others found on the
    /// way are closed). The caller watches it before using it (see above).
    std::optional<timed_socket> take(const std::string& origin);

    /// Parks a connection whose last response was read completely, for `lifetime`.
    void put(const std::string& origin, timed_socket connection, clock::duration lifetime);

    /// Closes expired connections.
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
