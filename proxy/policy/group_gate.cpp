#include "politeproxy/policy/group_gate.hpp"

#include <cassert>

namespace politeproxy {

bool group_gate::try_take() {
    if (!queue_.empty() || in_flight_ >= limit_) return false;
    ++in_flight_;
    return true;
}

void group_gate::enqueue(waiter& w) {
    assert(w.state_ == waiter_state::idle);
    w.state_ = waiter_state::queued;
    queue_.push_back(w);
}

void group_gate::cancel(waiter& w) {
    if (w.state_ == waiter_state::queued) queue_.erase(queue_.iterator_to(w));
    else if (w.state_ == waiter_state::granted) release();
    w.state_ = waiter_state::idle;
}

void group_gate::release() {
    assert(in_flight_ > 0);
    if (in_flight_ > 0) --in_flight_;
}

void group_gate::advance(std::vector<waiter*>& granted) {
    while (!queue_.empty() && in_flight_ < limit_) {
        waiter& w = queue_.front();
        queue_.pop_front();
        w.state_ = waiter_state::granted;
        ++in_flight_;
        granted.push_back(&w);
    }
}

}  // namespace politeproxy
