#include "politeproxy/base/manual_time.hpp"

#include <boost/asio/post.hpp>

#include <vector>

namespace politeproxy {

clock::time_point manual_now(const manual_time& m) { return m.now(); }

alarm::~alarm() {
    if (time_) time_->disarm(id_);
}

alarm manual_time::arm(steady_timer& timer, clock::time_point at) {
    timer.expires_at(clock::time_point::max());
    std::uint64_t id = 0;
    bool due = false;
    {
        std::lock_guard lock(mutex_);  // advance() moves the time under it
        id = next_id_++;
        due = at <= now();
        armed_.emplace(id, armed{at, &timer, timer.get_executor(), due});
    }
    if (due) ring(id, timer.get_executor());
    return alarm(this, id);
}

void manual_time::disarm(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    armed_.erase(id);
}

void manual_time::ring(std::uint64_t id, const executor& ex) {
    // The timer is touched only on its own executor; its alarm is destroyed there too, so
    // finding the id armed there means the timer is still alive.
    boost::asio::post(ex, [this, id] {
        std::lock_guard lock(mutex_);
        if (const auto it = armed_.find(id); it != armed_.end()) it->second.timer->cancel();
    });
}

void manual_time::advance(clock::duration d) {
    std::vector<std::pair<std::uint64_t, executor>> due;
    {
        std::lock_guard lock(mutex_);
        const auto now = clock::time_point(clock::duration(now_.load(std::memory_order_relaxed))) + d;
        now_.store(now.time_since_epoch().count(), std::memory_order_release);
        for (auto& [id, a] : armed_)
            if (a.at <= now && !a.rung) {
                a.rung = true;
                due.emplace_back(id, a.ex);
            }
    }
    for (auto& [id, ex] : due) ring(id, ex);
}

}  // namespace politeproxy
