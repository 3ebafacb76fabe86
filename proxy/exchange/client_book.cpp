#include "politeproxy/exchange/client_book.hpp"

#include <algorithm>

namespace politeproxy {

bool client_state::await_slot(const std::shared_ptr<host_entry>& host) {
    {
        std::lock_guard lock(mutex_);
        std::erase_if(waiting_hosts_, [](const std::weak_ptr<host_entry>& h) { return h.expired(); });
        const bool known = std::any_of(waiting_hosts_.begin(), waiting_hosts_.end(),
                                       [&](const std::weak_ptr<host_entry>& h) { return h.lock() == host; });
        if (!known) waiting_hosts_.push_back(host);
    }
    return may_hold();
}

std::vector<std::shared_ptr<host_entry>> client_state::take_waiting_hosts() {
    std::vector<std::weak_ptr<host_entry>> taken;
    {
        std::lock_guard lock(mutex_);
        taken.swap(waiting_hosts_);
    }
    std::vector<std::shared_ptr<host_entry>> out;
    out.reserve(taken.size());
    for (auto& h : taken)
        if (auto host = h.lock()) out.push_back(std::move(host));
    return out;
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

std::shared_ptr<client_state> client_book::find(std::string_view name, clock::time_point now) {
    if (name.empty()) name = anonymous_client;
    std::lock_guard lock(mutex_);
    if (!config_) return nullptr;
    auto it = clients_.find(std::string(name));
    if (it == clients_.end())
        it = clients_
                 .emplace(std::string(name), std::make_shared<client_state>(std::string(name), config_->weight_of(name),
                                                                            config_->max_waiting, config_->max_in_flight))
                 .first;
    it->second->touch(now);
    return it->second;
}

std::size_t client_book::evict_idle(clock::time_point now, clock::duration idle_for, const evicted_fn& on_evicted) {
    std::lock_guard lock(mutex_);
    std::size_t evicted = 0;
    for (auto it = clients_.begin(); it != clients_.end();) {
        const client_state& c = *it->second;
        // use_count 1: no request holds it (a parked or departed one would).
        if (it->second.use_count() == 1 && c.waiting() == 0 && c.in_flight() == 0 && now - c.last_used() >= idle_for) {
            if (on_evicted) on_evicted(it->first, client_counts{c.outcomes()});
            it = clients_.erase(it);
            ++evicted;
        } else {
            ++it;
        }
    }
    return evicted;
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
