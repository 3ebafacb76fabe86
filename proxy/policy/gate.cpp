#include "politeproxy/policy/gate.hpp"

#include <cassert>

namespace politeproxy {

gate::gate(const gate_limits& limits, clock::time_point now)
    : limits_(limits), bucket_(limits.rate, limits.burst, now) {
    slot_queue_.set_fair(limits.fair);
}

gate::~gate() {
    // Owners cancel their waiters first; unlink defensively so a bug cannot leave
    // dangling hooks behind.
    group_line_.clear();
    token_line_.clear();
}

bool gate::try_depart(clock::time_point now, client_account* client) {
    if (!limits_.enforce) {
        if (in_flight_ >= limits_.concurrency || now < paused_until_ || !bucket_.try_take(now)) ++would_have_waited_;
        if (client) client->hold_anyway();
        ++in_flight_;
        return true;
    }
    if (!slot_free(now)) return false;
    if (client) {
        // The token is looked at first and taken last: neither the client's slot nor the
        // token is taken for a request that does not go.
        if (bucket_.wait_for_token(now) != clock::duration::zero() || !client->try_hold()) return false;
        const bool token = bucket_.try_take(now);
        assert(token);
        (void)token;
    } else if (!bucket_.try_take(now)) {
        return false;
    }
    ++in_flight_;
    return true;
}

bool gate::would_depart(clock::time_point now) const {
    return slot_free(now) && bucket_.wait_for_token(now) == clock::duration::zero();
}

gate::queued gate::enqueue(waiter& w, bool needs_groups) {
    assert(w.state_ == waiter_state::idle);
    // The client's own cap first: a client over it is told so, whatever the host's queue.
    if (w.client && !w.client->try_wait()) return queued::client_full;
    if (waiting() >= limits_.max_waiting &&
        (!limits_.fair || waiting() >= 2 * limits_.max_waiting ||
         slot_queue_.waiting_of(w.client) >= slot_queue_.share_of(w.client, limits_.max_waiting))) {
        if (w.client) w.client->stop_waiting();
        return queued::host_full;
    }
    w.state_ = waiter_state::queued;
    w.needs_groups_ = needs_groups;
    w.wake_at_ = clock::time_point::max();
    slot_queue_.push_back(w);
    return queued::yes;
}

void gate::cancel(waiter& w) {
    switch (w.state_) {
    case waiter_state::queued:
        slot_queue_.erase(w);
        if (w.client) w.client->stop_waiting();
        break;
    case waiter_state::awaiting_groups:
        group_line_.erase(group_line_.iterator_to(w));
        unhold(w.client);
        break;
    case waiter_state::holding_slot:
        token_line_.erase(token_line_.iterator_to(w));
        unhold(w.client);
        break;
    case waiter_state::idle:
    case waiter_state::departed:
        return;
    }
    w.state_ = waiter_state::idle;
    w.wake_at_ = clock::time_point::max();
}

void gate::groups_granted(waiter& w) {
    assert(w.state_ == waiter_state::awaiting_groups);
    if (w.state_ != waiter_state::awaiting_groups) return;
    group_line_.erase(group_line_.iterator_to(w));
    w.state_ = waiter_state::holding_slot;
    token_line_.push_back(w);
}

void gate::release(client_account* client) {
    assert(in_flight_ > 0);
    if (in_flight_ > 0) --in_flight_;
    unhold(client);
}

void gate::take_client_news(client_news& out) {
    out.capped.clear();
    out.freed.clear();
    if (news_) std::swap(out, *news_);
}

void gate::depart(waiter& w, std::vector<waiter*>& woken) {
    w.state_ = waiter_state::departed;
    w.wake_at_ = clock::time_point::max();
    ++in_flight_;
    woken.push_back(&w);
}

void gate::advance(clock::time_point now, std::vector<waiter*>& woken) {
    if (!limits_.enforce) return advance_observing(now, woken);
    const bool paused = now < paused_until_;
    take_back(paused, woken);
    slot_queue_.bring_back();
    while (slots_held() < limits_.concurrency) {
        fair_queue::node* next = slot_queue_.next();
        if (!next) break;
        waiter& w = static_cast<waiter&>(*next);
        if (w.needs_groups_ && paused) {
            // A paused host takes no group slots: the group's other hosts go on meanwhile.
            // The head looks again when the pause ends.
            if (w.wake_at_ != paused_until_ && paused_until_ != clock::time_point::max()) {
                w.wake_at_ = paused_until_;
                woken.push_back(&w);
            }
            break;
        }
        if (w.client && !w.client->try_take_slot()) {
            // Its client is at max_in_flight: the slot goes to the next client's turn.
            slot_queue_.set_aside_next();
            news().capped.push_back(w.client);
            continue;
        }
        slot_queue_.pop_next();
        if (w.needs_groups_) {
            w.state_ = waiter_state::awaiting_groups;
            w.wake_at_ = clock::time_point::max();
            group_line_.push_back(w);
            woken.push_back(&w);  // its owner climbs the group ladder
        } else {
            w.state_ = waiter_state::holding_slot;
            token_line_.push_back(w);
        }
    }
    while (!paused && !token_line_.empty() && bucket_.try_take(now)) {
        waiter& w = token_line_.front();
        token_line_.pop_front();
        depart(w, woken);
    }
    if (!token_line_.empty()) {
        waiter& head = token_line_.front();
        const auto due = paused ? paused_until_ : now + bucket_.wait_for_token(now);
        if (head.wake_at_ != due) {
            head.wake_at_ = due;
            woken.push_back(&head);
        }
    }
}

void gate::take_back(bool paused, std::vector<waiter*>& woken) {
    // Slots not yet used come back (and, while paused, every slot held with group slots),
    // newest holders first, each to the head of its client's lane. Nothing that departed
    // is touched.
    for (waiter_list* line : {&group_line_, &token_line_}) {
        while (!line->empty() && (slots_held() > limits_.concurrency || (paused && line->back().needs_groups_))) {
            waiter& w = line->back();
            line->pop_back();
            w.state_ = waiter_state::queued;
            w.wake_at_ = clock::time_point::max();
            slot_queue_.push_front(w);
            if (w.client) w.client->wait_anyway();
            unhold(w.client);
            if (w.needs_groups_) woken.push_back(&w);  // its owner gives its group slots back
        }
    }
}

void gate::advance_observing(clock::time_point now, std::vector<waiter*>& woken) {
    // A limit lowered or a switch from enforcing may leave waiters parked: release them.
    auto go = [&](waiter& w) {
        const bool would_wait = in_flight_ >= limits_.concurrency || now < paused_until_ || !bucket_.try_take(now);
        if (would_wait) ++would_have_waited_;
        depart(w, woken);
    };
    for (waiter_list* list : {&token_line_, &group_line_}) {
        while (!list->empty()) {
            waiter& w = list->front();
            list->pop_front();
            go(w);
        }
    }
    slot_queue_.bring_back();
    while (fair_queue::node* next = slot_queue_.next()) {
        waiter& w = static_cast<waiter&>(*next);
        slot_queue_.pop_next();
        if (w.client) {
            w.client->stop_waiting();
            w.client->hold_anyway();
        }
        go(w);
    }
}

void gate::set_limits(const gate_limits& limits, clock::time_point now) {
    limits_ = limits;
    slot_queue_.set_fair(limits.fair);
    bucket_.reconfigure(limits.rate, limits.burst, now);
}

bool gate::idle(clock::time_point now) const {
    return in_flight_ == 0 && waiting() == 0 && bucket_.full(now);
}

}  // namespace politeproxy
