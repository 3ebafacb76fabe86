#include "politeproxy/policy/fleet_line.hpp"

#include <algorithm>

namespace politeproxy {

fleet_line::departure fleet_line::leave(gate::waiter& w, bool granted) {
    if (!s_) return {};
    auto& line = s_->line;
    const auto it = std::find(line.begin(), line.end(), &w);
    if (it == line.end()) return {};
    const bool was_head = it == line.begin();
    line.erase(it);
    if (!was_head) return {};
    s_->backoff = poll_initial;  // the next head starts afresh
    if (!line.empty()) return {line.front(), false};
    return {nullptr, !granted};
}

void fleet_line::heard(const answer& a, clock::time_point now) {
    if (a.granted) ++state().leased;
    heard_held(a.held, now);
}

clock::time_point fleet_line::head_refused(const answer& a, clock::time_point now) {
    if (a.paused_for > clock::duration::zero()) return now + a.paused_for;
    line_state& s = state();
    const clock::duration wait = std::min(a.token_in > clock::duration::zero() ? a.token_in : s.backoff, place_keepalive);
    s.backoff = std::min(s.backoff * 2, poll_max);
    return now + wait;
}

void fleet_line::heard_held(std::size_t held, clock::time_point now) {
    line_state& s = state();
    s.held = held;
    s.others = held > s.leased ? held - s.leased : 0;
    s.heard_at = now;
}

void fleet_line::returned() {
    if (!s_) return;
    if (s_->leased > 0) --s_->leased;
    // The store's count as this process last heard it, less what went back.
    if (s_->held && *s_->held > 0) --*s_->held;
}

}  // namespace politeproxy
