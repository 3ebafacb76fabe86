#include "politeproxy/exchange/client_book.hpp"

#include <algorithm>

namespace politeproxy {

bool client_state::await_slot(const std::shared_ptr<host_entry>& host) {
    {
        std::lock_guard lock(mutex_);
        if (registered_.insert(host).second) waiting_hosts_.push_back(host);
    }
    return may_hold();
}

std::shared_ptr<host_entry> client_state::next_waiting_host() {
    std::lock_guard lock(mutex_);
    while (!waiting_hosts_.empty()) {
        std::weak_ptr<host_entry> first = std::move(waiting_hosts_.front());
        waiting_hosts_.pop_front();
        registered_.erase(first);
        if (auto host = first.lock()) return host;  // else forgotten meanwhile
    }
    return nullptr;
}

client_counts& client_counts::operator+=(const client_counts& o) {
    for (std::size_t i = 0; i < outcome_count; ++i) outcomes[i] += o.outcomes[i];
    return *this;
}

void client_book::set_config(const std::optional<clients_config>& clients) {
    std::lock_guard lock(mutex_);
    config_ = clients;
    if (!config_) return;
    for (auto& [name, c] : clients_) c->set_limits(config_->weight_of(name), config_->max_waiting, config_->max_in_flight);
}

template <class Forget>
std::size_t client_book::forget_idle_locked(Forget&& forget, const evicted_fn& on_evicted) {
    std::size_t forgotten = 0;
    for (auto it = clients_.begin(); it != clients_.end();) {
        const client_state& c = *it->second;
        // use_count 1: no request holds it (a parked or departed one would).
        if (it->second.use_count() == 1 && c.waiting() == 0 && c.in_flight() == 0 && forget(c)) {
            if (on_evicted) on_evicted(it->first, client_counts{c.outcomes()});
            it = clients_.erase(it);
            ++forgotten;
        } else {
            ++it;
        }
    }
    return forgotten;
}

std::shared_ptr<client_state> client_book::find(std::string_view name, clock::time_point now) {
    if (name.empty()) name = anonymous_client;
    std::lock_guard lock(mutex_);
    if (!config_) return nullptr;
    auto it = clients_.find(name);
    if (it == clients_.end()) {
        if (clients_.size() >= max_clients &&
            forget_idle_locked([](const client_state&) { return true; }, last_evicted_) == 0)
            name = anonymous_client;  // every one of them busy: no room for another name
        it = clients_.find(name);
        if (it == clients_.end())
            it = clients_
                     .emplace(std::string(name),
                              std::make_shared<client_state>(std::string(name), config_->weight_of(name),
                                                             config_->max_waiting, config_->max_in_flight))
                     .first;
    }
    it->second->touch(now);
    return it->second;
}

std::size_t client_book::evict_idle(clock::time_point now, clock::duration idle_for, const evicted_fn& on_evicted) {
    std::lock_guard lock(mutex_);
    last_evicted_ = on_evicted;
    return forget_idle_locked([&](const client_state& c) { return now - c.last_used() >= idle_for; }, on_evicted);
}

std::vector<client_snapshot> client_book::snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<client_snapshot> out;
    out.reserve(clients_.size());
    for (const auto& [name, c] : clients_)
        out.push_back({name, c->weight(), c->waiting(), c->in_flight(), c->outcomes()});
    return out;
}

std::size_t client_book::size() const {
    std::lock_guard lock(mutex_);
    return clients_.size();
}

}  // namespace politeproxy
