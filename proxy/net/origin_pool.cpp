#include "politeproxy/net/origin_pool.hpp"

namespace politeproxy {

std::optional<timed_socket> origin_pool::take(const std::string& origin) {
    const auto it = idle_.find(origin);
    if (it == idle_.end()) return std::nullopt;
    auto& conns = it->second;
    const auto now = clock::now();
    std::optional<timed_socket> found;
    while (!conns.empty() && !found) {
        idle_connection c = std::move(conns.back());  // most recently used: warmest
        conns.pop_back();
        count_.fetch_sub(1, std::memory_order_relaxed);
        if (now < c.expires && !c.connection.holds_unread()) found.emplace(std::move(c.connection));
    }
    return found;
}

void origin_pool::put(const std::string& origin, timed_socket connection, clock::duration lifetime) {
    if (count_.load(std::memory_order_relaxed) >= max_idle_total) return;  // closes it: file descriptors are finite
    auto& conns = idle_[origin];
    if (conns.size() >= max_idle_per_origin) {
        conns.pop_front();
        count_.fetch_sub(1, std::memory_order_relaxed);
    }
    const auto now = clock::now();
    conns.push_back({std::move(connection), now + lifetime});
    count_.fetch_add(1, std::memory_order_relaxed);
}

void origin_pool::sweep(clock::time_point now) {
    for (auto it = idle_.begin(); it != idle_.end();) {
        auto& conns = it->second;
        const auto before = conns.size();
        std::erase_if(conns, [now](idle_connection& c) { return now >= c.expires; });
        count_.fetch_sub(before - conns.size(), std::memory_order_relaxed);
        it = conns.empty() ? idle_.erase(it) : std::next(it);
    }
}
void origin_pool::clear() {
    idle_.clear();
    count_.store(0, std::memory_order_relaxed);
}

std::size_t origin_pool::idle_count() const { return count_.load(std::memory_order_relaxed); }

}  // namespace politeproxy
