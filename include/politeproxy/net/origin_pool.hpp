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
/// handed out to one request at a time; one that the origin closed while idle is
/// dropped on the way out (see take()). Bounded per origin and in total, and each expires after the
/// lifetime it was parked with.
///
/// Each worker thread has its own pool: a socket belongs to the event loop it was opened
/// on. Thread safety: members lock, so the admin listener may read idle_count() from
/// another thread.
class origin_pool {
public:
    static constexpr std::size_t max_idle_per_origin = 1024;
    static constexpr std::size_t max_idle_total = 4096;
    static constexpr auto trust_for = std::chrono::milliseconds(500);

    /// A live idle connection to `origin`, if there is one. One pooled moments ago is
    /// taken on trust when the caller can retry on a new connection (`retryable`);
    /// otherwise it is checked for a close or stray bytes first.
    std::optional<timed_socket> take(const std::string& origin, bool retryable);

    /// Parks a connection whose last response was read completely, for `lifetime`.
    void put(const std::string& origin, timed_socket connection, clock::duration lifetime);

    /// Closes expired connections and ones the origin closed.
    void sweep(clock::time_point now);

    /// Closes every idle connection.
    void clear();

    std::size_t idle_count() const;

private:
    struct idle_connection {
        timed_socket connection;
        clock::time_point pooled_at;
        clock::time_point expires;
    };

    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::deque<idle_connection>> idle_;
    std::size_t count_ = 0;
};

}  // namespace politeproxy
