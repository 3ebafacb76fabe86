#include "politeproxy/policy/fleet_line.hpp"

#include <algorithm>

namespace politeproxy {

fleet_line::departure fleet_line::leave(gate::waiter& w, bool granted) {
    const auto it = std::find(line_.begin(), line_.end(), &w);
    if (it == line_.end()) return {};
    const bool was_head = it == line_.begin();
    line_.erase(it);
    if (!was_head) return {};
    backoff_ = poll_initial;  // the next head starts afresh
    if (!line_.empty()) return {line_.front(), false};
    return {nullptr, !granted};
}

void fleet_line::heard(const answer& a, clock::time_point now) {
    if (a.granted) ++leased_;
    heard_held(a.held, now);
}

clock::time_point fleet_line::head_refused(const answer& a, clock::time_point now) {
    if (a.paused_for > clock::duration::zero()) return now + a.paused_for;
    const clock::duration wait = std::min(a.token_in > clock::duration::zero() ? a.token_in : backoff_, place_keepalive);
    backoff_ = std::min(backoff_ * 2, poll_max);
    return now + wait;
}

void fleet_line::heard_held(std::size_t held, clock::time_point now) {
    held_ = held;
    others_ = held > leased_ ? held - leased_ : 0;
    heard_at_ = now;
}

void fleet_line::returned() {
    if (leased_ > 0) --leased_;
    // The store's count as this process last heard it, less what went back.
    if (held_ && *held_ > 0) --*held_;
}

}  // namespace politeproxy
