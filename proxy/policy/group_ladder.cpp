#include "politeproxy/policy/group_ladder.hpp"

#include <cassert>
#include <utility>

namespace politeproxy {

void group_ladder::take(group_ladder& other) noexcept {
    assert(held_ == 0);
    for (std::size_t i = 0; i < max_levels; ++i) levels_[i] = std::move(other.levels_[i]);
    count_ = std::exchange(other.count_, 0);
    held_ = std::exchange(other.held_, 0);
}

void group_ladder::set_levels(std::shared_ptr<group_gate> domain, std::shared_ptr<group_gate> ip) {
    assert(held_ == 0);
    count_ = 0;
    levels_ = {};
    for (auto* g : {&domain, &ip})
        if (*g) levels_[count_++] = std::move(*g);
}

bool group_ladder::engaged(const group_gate::waiter& node) const {
    return held_ > 0 || node.state() != group_gate::waiter_state::idle;
}

bool group_ladder::try_take_all() {
    assert(held_ == 0);
    for (std::size_t i = 0; i < count_; ++i) {
        if (levels_[i]->try_take()) continue;
        while (i > 0) levels_[--i]->release();  // nobody can be parked behind a free slot
        return false;
    }
    held_ = count_;
    return true;
}

bool group_ladder::climb(group_gate::waiter& node) {
    while (held_ < count_) {
        switch (node.state()) {
        case group_gate::waiter_state::queued:
            return false;
        case group_gate::waiter_state::granted:
            node.accept();
            ++held_;
            break;
        case group_gate::waiter_state::idle:
            if (levels_[held_]->try_take()) {
                ++held_;
            } else {
                levels_[held_]->enqueue(node);
                return false;
            }
            break;
        }
    }
    return true;
}

void group_ladder::descend(group_gate::waiter& node, std::vector<group_gate::waiter*>& granted) {
    if (node.state() != group_gate::waiter_state::idle) {
        levels_[held_]->cancel(node);
        levels_[held_]->advance(granted);
    }
    while (held_ > 0) {
        group_gate& g = *levels_[--held_];
        g.release();
        g.advance(granted);
    }
}

}  // namespace politeproxy
