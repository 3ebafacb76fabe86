#include "politeproxy/net/origin_pool.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace politeproxy {
namespace {

// An idle keep-alive connection must have nothing to read: EOF means the origin
// closed it, bytes mean it sent something unsolicited. Either way it is unusable.
bool still_open(timed_socket& c) {
    char byte;
    const ssize_t n = ::recv(c.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

std::optional<timed_socket> origin_pool::take(const std::string& origin, bool retryable) {
    std::lock_guard lock(mutex_);
    const auto it = idle_.find(origin);
    if (it == idle_.end()) return std::nullopt;
    auto& conns = it->second;
    const auto now = clock::now();
    std::optional<timed_socket> found;
    while (!conns.empty() && !found) {
        idle_connection c = std::move(conns.back());  // most recently used: warmest
        conns.pop_back();
        --count_;
        // The peek is a system call per request; a close it would have seen is caught
        // by the retry, and stray bytes within a moment of the last response are rare.
        const bool trusted = retryable && now - c.pooled_at < trust_for;
        if (now < c.expires && (trusted || still_open(c.connection))) found.emplace(std::move(c.connection));
    }
    if (conns.empty()) idle_.erase(it);
    return found;
}

void origin_pool::put(const std::string& origin, timed_socket connection, clock::duration lifetime) {
    std::lock_guard lock(mutex_);
    if (count_ >= max_idle_total) return;  // closes it: file descriptors are finite
    auto& conns = idle_[origin];
    if (conns.size() >= max_idle_per_origin) {
        conns.pop_front();
        --count_;
    }
    const auto now = clock::now();
    conns.push_back({std::move(connection), now, now + lifetime});
    ++count_;
}

void origin_pool::sweep(clock::time_point now) {
    std::lock_guard lock(mutex_);
    for (auto it = idle_.begin(); it != idle_.end();) {
        auto& conns = it->second;
        const auto before = conns.size();
        std::erase_if(conns, [now](idle_connection& c) { return now >= c.expires || !still_open(c.connection); });
        count_ -= before - conns.size();
        it = conns.empty() ? idle_.erase(it) : std::next(it);
    }
}

void origin_pool::clear() {
    std::lock_guard lock(mutex_);
    idle_.clear();
    count_ = 0;
}

std::size_t origin_pool::idle_count() const {
    std::lock_guard lock(mutex_);
    return count_;
}

}  // namespace politeproxy
