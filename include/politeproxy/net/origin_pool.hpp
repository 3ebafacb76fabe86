#pragma once
#include "politeproxy/base/clock.hpp"

#include "politeproxy/net/timed_socket.hpp"

#include <atomic>
#include <deque>
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
/// on, and only that loop's thread calls take, put and sweep (clear: once it stopped), so
/// they take no lock. idle_count() may be read from any thread (the admin listener).
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

    /// Closes expired connections, and forgets origins with none left (take and put keep
    /// an origin's entry between them: no allocation per request).
    void sweep(clock::time_point now);

    /// Closes every idle connection.
    void clear();

    std::size_t idle_count() const;

private:
    struct idle_connection {
        timed_socket connection;
        clock::time_point expires;
    };

    std::unordered_map<std::string, std::deque<idle_connection>> idle_;
    std::atomic<std::size_t> count_{0};  ///< written by the owning loop only
};

}  // namespace politeproxy
