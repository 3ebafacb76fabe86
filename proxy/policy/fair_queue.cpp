#include "politeproxy/policy/fair_queue.hpp"

#include <algorithm>
#include <cassert>

namespace politeproxy {

namespace {
constexpr std::size_t min_idle_lanes = 4;
}

fair_queue::fair_queue() = default;

fair_queue::~fair_queue() {
    // The gate cancels its waiters first; unlink defensively.
    if (lanes_)
        for (auto& [key, l] : *lanes_) l->waiters.clear();
    ring_.clear();
    aside_.clear();
    idle_.clear();
}

fair_queue::lane& fair_queue::lane_of(client_account* key) {
    if (last_ && last_->key == key) return *last_;
    if (!lanes_) lanes_ = std::make_unique<lane_map>();
    auto [it, added] = lanes_->try_emplace(key);
    if (added) {
        it->second = std::make_unique<lane>();
        it->second->key = key;
        idle_.push_back(*it->second);
        ++idle_count_;
    }
    last_ = it->second.get();
    return *last_;
}

void fair_queue::join_ring(lane& l, bool first, unsigned credit) {
    idle_.erase(idle_.iterator_to(l));
    --idle_count_;
    l.where = place::ring;
    l.weight = weight_of(l.key);
    l.credit = credit;
    weights_ += l.weight;
    ++busy_;
    if (first)
        ring_.push_front(l);
    else
        ring_.push_back(l);
}

void fair_queue::leave(lane& l) {
    (l.where == place::ring ? ring_ : aside_).erase(lane_list::s_iterator_to(l));
    weights_ -= l.weight;
    --busy_;
    l.where = place::idle;
    l.credit = 0;
    idle_.push_back(l);
    ++idle_count_;
    // Keep as many idle lanes as busy ones for reuse, the oldest go.
    while (idle_count_ > std::max<std::size_t>(min_idle_lanes, busy_)) {
        lane& old = idle_.front();
        idle_.pop_front();
        --idle_count_;
        if (&old == last_) last_ = nullptr;
        lanes_->erase(old.key);
    }
}

void fair_queue::push_back_slow(node& n) {
    lane& l = lane_of(fair_ ? n.client : nullptr);
    l.waiters.push_back(n);
    n.lane_ = &l;
    ++size_;
    if (l.where == place::idle) join_ring(l, false, weight_of(l.key));
}

void fair_queue::push_front(node& n) {
    lane& l = lane_of(fair_ ? n.client : nullptr);
    l.waiters.push_front(n);
    n.lane_ = &l;
    ++size_;
    if (l.where == place::idle) {
        join_ring(l, true, 1);
    } else {
        ++l.credit;
        if (l.where == place::ring && &ring_.front() != &l) {
            ring_.erase(ring_.iterator_to(l));
            ring_.push_front(l);
        }
    }
}

void fair_queue::turn_over(lane& l) {
    if (l.waiters.empty()) return leave(l);
    // Its turn is over: to the back, with its next turn's credit (its weight now).
    const unsigned weight = weight_of(l.key);
    weights_ = weights_ - l.weight + weight;
    l.weight = weight;
    l.credit = weight;
    if (&ring_.back() == &l) return;  // alone in the ring: its own next turn
    ring_.pop_front();
    ring_.push_back(l);
}

void fair_queue::set_aside_next() {
    assert(!ring_.empty());
    lane& l = ring_.front();
    ring_.pop_front();
    l.where = place::aside;
    aside_.push_back(l);
}

void fair_queue::bring_back_all() {
    while (!aside_.empty()) {
        lane& l = aside_.front();
        aside_.pop_front();
        l.where = place::ring;
        ring_.push_back(l);
    }
}

void fair_queue::erase(node& n) {
    lane& l = *n.lane_;
    l.waiters.erase(l.waiters.iterator_to(n));
    n.lane_ = nullptr;
    --size_;
    if (l.waiters.empty()) leave(l);
}

const fair_queue::lane* fair_queue::find(client_account* client) const {
    if (!lanes_) return nullptr;
    const auto it = lanes_->find(client);
    return it == lanes_->end() ? nullptr : it->second.get();
}

std::size_t fair_queue::waiting_of(client_account* client) const {
    if (!fair_) return size_;
    const lane* l = find(client);
    return l ? l->waiters.size() : 0;
}

std::size_t fair_queue::share_of(client_account* client, std::size_t max_waiting) const {
    if (!fair_) return max_waiting;
    const lane* l = find(client);
    const bool waits = l && l->where != place::idle;
    const std::size_t weight = waits ? l->weight : weight_of(client);
    const std::size_t all = weights_ + (waits ? 0 : weight);
    return std::max<std::size_t>(1, max_waiting * weight / all);
}

}  // namespace politeproxy
