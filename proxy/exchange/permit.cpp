#include "politeproxy/exchange/permit.hpp"

#include "politeproxy/exchange/host_gates.hpp"

#include <utility>

namespace politeproxy {

permit::permit(permit&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      lease_(std::exchange(other.lease_, 0)),
      group_slots_(std::move(other.group_slots_)),
      entry_(std::move(other.entry_)),
      policy_(std::move(other.policy_)),
      client_(std::move(other.client_)),
      queue_wait_(other.queue_wait_),
      epoch_(other.epoch_),
      outcome_(other.outcome_),
      counted_(other.counted_) {}

permit& permit::operator=(permit&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = std::exchange(other.owner_, nullptr);
        lease_ = std::exchange(other.lease_, 0);
        group_slots_ = std::move(other.group_slots_);
        entry_ = std::move(other.entry_);
        policy_ = std::move(other.policy_);
        client_ = std::move(other.client_);
        queue_wait_ = other.queue_wait_;
        epoch_ = other.epoch_;
        outcome_ = other.outcome_;
        counted_ = other.counted_;
    }
    return *this;
}

permit::~permit() { reset(); }

void permit::reset() {
    if (!entry_) return;
    if (group_slots_) {
        group_gate::waiter not_parked;  // a permit holds its group slots, it waits at none
        owner_->leave_groups(*group_slots_, not_parked);
        group_slots_.reset();
    }
    owner_->release(*entry_, outcome_, counted_, std::exchange(lease_, 0), client_.get());
    entry_.reset();
    policy_.reset();
    client_.reset();
    owner_ = nullptr;
}

void permit::report(health_signal signal) {
    if (!entry_) return;
    signal.epoch = epoch_;
    owner_->report(*entry_, signal);
}

const host_policy& permit::policy() const { return *policy_; }

time_source permit::time() const { return owner_ ? owner_->time() : time_source(); }

}  // namespace politeproxy
