// host_gates: admission (at once and parked), release, health reports, shutdown.
#include "host_gates_parts.hpp"

#include "politeproxy/base/error.hpp"
#include "politeproxy/fleet/fleet_client.hpp"
#include "politeproxy/policy/fleet_lease.hpp"
#include "politeproxy/policy/public_suffixes.hpp"

#include <boost/asio/this_coro.hpp>

#include <cassert>

namespace politeproxy {
namespace asio = boost::asio;
using namespace gates_detail;

void host_gates::apply_health(host_entry& e, clock::time_point now) const {
    const host_policy& p = *e.policy;
    std::size_t limit = std::min(e.health.limit(), e.stream_ceiling.value_or(e.health.limit()));
    double rate = std::min(e.health.rate(), e.robots_rate.value_or(e.health.rate()));
    if (fleet_) {
        // The store's node for this host lost: the share. For lease_ttl after the loss,
        // also once it is back (a promoted replica may lack the last leases, which their
        // holders re-assert as they come back), only what the others left.
        const auto& f = fleet_->config();
        const auto lost = e.fleet.lost_at();
        const bool hold = lost && now < *lost + f.lease_ttl && now - e.fleet.heard_at() <= f.lease_ttl;
        if (hold) limit = fleet_share::limit_during_hold(limit, f.expected_workers, e.fleet.others());
        else if (e.fleet.store_down()) limit = fleet_share::limit(limit, f.expected_workers);
        if (hold || e.fleet.store_down()) rate = fleet_share::rate(rate, f.expected_workers);
    }
    e.g.set_limits({limit, rate, p.burst, p.queue.max_waiting, p.enforce, fair_.load(std::memory_order_relaxed)}, now);
    e.g.set_pause(e.robots_hold ? clock::time_point::max() : e.paused_until());
}

host_gates::host_gates(std::shared_ptr<const config> cfg, time_source time, std::uint64_t seed)
    : time_(time),
      config_(std::move(cfg)),
      table_(seed),
      robots_(config_->robots.cache_ttl, config_->robots.max_delay) {
    clients_.set_config(config_->clients);
    fair_ = config_->clients && config_->clients->fair;
}

host_gates::~host_gates() = default;

void host_gates::choose_groups(const host_entry& e, const std::string& address, group_ladder& ladder) {
    std::shared_ptr<group_gate> ip;
    if (!address.empty() && e.policy->enforce) {
        const auto cfg = current_config();
        if (cfg->groups.ip) {
            std::lock_guard lock(groups_.mutex());
            ip = groups_.find_or_create(cfg->groups, group_gates::level::ip, address);
        }
    }
    ladder.set_levels(e.domain ? e.domain->gate : nullptr, std::move(ip));
}

void host_gates::leave_groups(group_ladder& ladder, group_gate::waiter& node) {
    if (ladder.empty()) return;
    std::vector<group_gate::waiter*> granted;
    wakeups wake;
    std::lock_guard lock(groups_.mutex());  // a group's grant writes the node's state
    if (!ladder.engaged(node)) return;
    ladder.descend(node, granted);
    wake.add(granted);  // under the lock: a granted waiter that gives up needs it to go away
}

permit host_gates::depart_at_once_locked(const host_table::place& where, const std::string& address,
                                         clock::time_point now, const std::shared_ptr<client_state>& client,
                                         wakeups* wake) {
    if (closed_) return {};
    auto entry = find_or_create(where, now);
    entry->last_used = now;
    if (entry->health.tick(now)) {
        apply_health(*entry, now);
        publish_locked(*entry, now);
    }
    see_store_loss_locked(*entry);  // try_depart below departs without a gate run
    // Requests already waiting for a lease go first.
    if (!entry->fleet.empty()) return {};
    std::unique_ptr<group_ladder> groups;  // most requests have none: nothing to allocate
    if (entry->domain || !address.empty()) {
        groups = std::make_unique<group_ladder>();
        choose_groups(*entry, address, *groups);
        if (groups->empty()) groups.reset();
    }
    if (groups) {
        // Every slot (host, then groups) and the token at once, or nothing.
        if (!entry->g.would_depart(now) || (client && !client->may_hold())) return {};
        std::lock_guard lock(groups_.mutex());
        if (!groups->try_take_all()) return {};
    }
    if (!entry->g.try_depart(now, client.get())) {
        if (groups) {  // the client reached its cap meanwhile (on another host)
            std::lock_guard lock(groups_.mutex());
            group_gate::waiter not_parked;
            std::vector<group_gate::waiter*> granted;
            groups->descend(not_parked, granted);
            wake->add(granted);
        }
        return {};
    }
    auto policy = entry->policy;
    const auto epoch = entry->health.epoch();
    permit p(this, std::move(entry), std::move(policy), {}, epoch);
    p.group_slots_ = std::move(groups);
    p.client_ = client;
    return p;
}

permit host_gates::try_acquire(const std::string& key, const std::string& address,
                               const std::shared_ptr<client_state>& client) {
    // With the store up every request needs a lease (acquire); without it, fail_closed
    // refuses in acquire, and local_share departs on the local gate alone.
    if (fleet_ && (fleet_needs_lease(key) || fleet_fails_closed())) return {};
    const auto where = table_.locate(key);
    // Wake-ups are owed only when a client's cap makes it give group slots back (most
    // requests, nobody's, skip making the object).
    std::optional<wakeups> wake;
    if (client) wake.emplace();
    std::lock_guard lock(where.s.mutex);
    permit p = depart_at_once_locked(where, address, time_.now(), client, wake ? &*wake : nullptr);
    if (p && fleet_) {
        p.lease_ = fleet_->hold_unasserted(key);  // asserted in the store when it is back
        p.entry_->fleet.leased_unasked();
    }
    return p;
}

task<acquire_result> host_gates::acquire(std::string key, std::string address, std::shared_ptr<client_state> client) {
    if (permit p = try_acquire(key, address, client)) co_return acquire_result{std::move(p), {}, {}};
    const auto start = time_.now();
    for (;;) {
        if (fleet_ && !fleet_needs_lease(key) && fleet_fails_closed()) {
            count_rejected(key, client.get());
            co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
        }
        auto local = co_await acquire_local(key, address, start, client);
        if (!local.granted || !fleet_) co_return local;
        if (!fleet_needs_lease(key)) {
            if (fleet_fails_closed()) {
                local.granted.counted_ = false;  // the slot ends no request: the refusal is counted
                count_rejected(key, client.get());
                co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
            }
            std::lock_guard lock(table_.at(local.granted.entry_->shard).mutex);
            local.granted.lease_ = fleet_->hold_unasserted(key);
            local.granted.entry_->fleet.leased_unasked();
            co_return local;
        }
        auto leased = co_await lease(std::move(local.granted), start);
        if (leased.ec == errc::fleet_unavailable && fleet_fails_closed()) count_rejected(key, client.get());
        if (leased.ec != errc::fleet_unavailable || fleet_fails_closed()) co_return leased;
        // The store went away while the request waited for its lease: its slot went
        // back, and it parks again under the local share.
    }
}

task<acquire_result> host_gates::acquire_local(const std::string& key, const std::string& address,
                                               clock::time_point start, const std::shared_ptr<client_state>& client) {
    const auto where = table_.locate(key);
    std::shared_ptr<host_entry> entry;
    // Every parked request costs memory (a coroutine chain, its header, its connection):
    // their number across all hosts is bounded, whichever clients and hosts they are.
    const parked_place parked(parked_, current_config()->limits.max_parked);
    {
        std::lock_guard lock(where.s.mutex);
        if (closed_) co_return acquire_result{{}, errc::shutting_down, shutdown_retry_after};
        entry = find_or_create(where, start);
        if (!parked) {
            count_rejected_locked(*entry, client.get());
            co_return acquire_result{{}, errc::parked_full, parked_retry_after};
        }
    }

    auto w = std::make_shared<parked_waiter>(co_await asio::this_coro::executor);
    // Whatever ends this coroutine without a permit (deadline, cancellation, shutdown, an
    // exception thrown by a cancelled co_await) takes the waiter out of the gate.
    struct leave_guard {
        host_gates* self = nullptr;
        host_entry* entry = nullptr;
        parked_waiter* w = nullptr;
        ~leave_guard() {
            if (self) self->cancel(*entry, *w);
        }
    } guard;
    clock::duration max_wait{};
    {
        wakeups wake;
        std::lock_guard lock(where.s.mutex);
        if (closed_) co_return acquire_result{{}, errc::shutting_down, shutdown_retry_after};
        max_wait = entry->policy->queue.max_wait;
        choose_groups(*entry, address, w->groups);
        w->client = client.get();
        if (const auto queued = entry->g.enqueue(*w, !w->groups.empty()); queued != gate::queued::yes) {
            count_rejected_locked(*entry, client.get());
            if (queued == gate::queued::client_full)
                co_return acquire_result{{}, errc::client_queue_full, client_retry_after};
            co_return acquire_result{{}, errc::queue_full, retry_after_hint(*entry, start)};
        }
        guard.self = this;
        guard.entry = entry.get();
        guard.w = w.get();
        wake.run_gate(*entry, start);
    }
    const auto deadline = start + max_wait;

    for (;;) {
        clock::time_point wake_at;
        gate::waiter_state state;
        const auto now = time_.now();
        std::optional<permit> granted;
        {
            std::lock_guard lock(where.s.mutex);
            state = w->host_node().state();
            if (state == gate::waiter_state::departed) {
                guard.self = nullptr;
                auto policy = entry->policy;
                const auto epoch = entry->health.epoch();
                granted.emplace(permit(this, std::move(entry), std::move(policy), now - start, epoch));
                granted->client_ = client;
                if (w->groups.complete() && !w->groups.empty())
                    granted->group_slots_ = std::make_unique<group_ladder>(std::move(w->groups));
            } else {
                if (closed_) co_return acquire_result{{}, errc::shutting_down, shutdown_retry_after};
                if (now >= deadline) {
                    count_rejected_locked(*entry, client.get());
                    co_return acquire_result{{}, errc::queue_timeout, retry_after_hint(*entry, now)};
                }
                wake_at = std::min(deadline, w->wake_at());
            }
        }
        if (granted) {
            // Departed before it held every group slot (its host switched to observe-only):
            // it gives back what it holds and leaves the group's queue.
            leave_groups(w->groups, w->group_node());
            co_return acquire_result{std::move(*granted), {}, {}};
        }
        if (state == gate::waiter_state::awaiting_groups) {
            // Holding the host slot: the group slots next, in order. Parked at a group,
            // the group's grant pokes us.
            bool all_held = false;
            {
                std::lock_guard lock(groups_.mutex());
                all_held = w->groups.climb(w->group_node());
            }
            if (all_held) {
                wakeups wake;
                std::lock_guard lock(where.s.mutex);
                if (w->host_node().state() == gate::waiter_state::awaiting_groups) {
                    entry->g.groups_granted(*w);
                    wake.run_gate(*entry, time_.now());
                }
                continue;
            }
        } else if (state == gate::waiter_state::queued) {
            leave_groups(w->groups, w->group_node());  // the host took its slot back (a lowered limit)
        }
        if (!co_await sleep_until(time_, *w, wake_at)) co_return acquire_result{{}, errc::cancelled, {}};
        if (time_.now() < wake_at) continue;  // a poke: the state changed, read it again
        // Our token is due, or a pause ended: run the gate.
        wakeups wake;
        std::lock_guard lock(where.s.mutex);
        const auto t = time_.now();
        if (entry->health.tick(t)) {
            apply_health(*entry, t);
            publish_locked(*entry, t);
        }
        wake.run_gate(*entry, t);
    }
}

void host_gates::cancel(host_entry& entry, gate::waiter& w) {
    auto& self = static_cast<parked_waiter&>(w);
    leave_groups(self.groups, self.group_node());  // the reverse order: groups, then the host
    wakeups wake;
    std::lock_guard lock(table_.at(entry.shard).mutex);
    if (w.state() == gate::waiter_state::departed)
        entry.g.release(w.client);  // granted as its requester gave up: pass it on
    else
        entry.g.cancel(w);
    wake.run_gate(entry, time_.now());
}

void host_gates::release(host_entry& entry, outcome how, bool counted, std::uint64_t lease, client_state* client) {
    if (lease && fleet_) fleet_->release(entry.key, lease);  // first: the next head's acquire queues behind it
    wakeups wake;
    std::lock_guard lock(table_.at(entry.shard).mutex);
    const auto now = time_.now();
    entry.g.release(client);
    if (lease) entry.fleet.returned();
    if (counted) {
        ++entry.outcomes[static_cast<std::size_t>(how)];
        if (client) client->count(how);
    }
    entry.last_used = now;
    if (entry.health.tick(now)) {
        apply_health(entry, now);
        publish_locked(entry, now);
    }
    wake.run_gate(entry, now);
    // One of our leases came back: the head of the fleet line may take it now.
    if (lease && !entry.fleet.empty()) wake.add(entry.fleet.head());
}

void host_gates::report(host_entry& entry, const health_signal& signal) {
    wakeups wake;
    shard& s = table_.at(entry.shard);
    std::lock_guard lock(s.mutex);
    const auto now = time_.now();
    const auto change = entry.health.on_signal(signal, now, [&s] {
        return std::uniform_real_distribution<double>(0.0, 1.0)(s.random);
    });
    if (change == limit_change::none) return;
    ++entry.limit_changes[static_cast<std::size_t>(change) - 1];
    apply_health(entry, now);
    publish_locked(entry, now);
    wake.run_gate(entry, now);  // a raised limit admits waiters at once
}

void host_gates::count_rejected_locked(host_entry& entry, client_state* client) {
    ++entry.outcomes[static_cast<std::size_t>(outcome::rejected)];
    if (client) client->count(outcome::rejected);
}

void gates_detail::wakeups::see_store_loss(host_entry& e) { e.owner->see_store_loss_locked(e); }

void gates_detail::wakeups::run_again(host_entry& e) {
    host_gates& gates = *e.owner;
    wakeups wake;
    std::lock_guard lock(gates.table_.at(e.shard).mutex);
    wake.run_gate(e, gates.time_.now());
}

void host_gates::close() {
    std::array<std::unique_lock<std::mutex>, host_table::shard_count> locks;
    for (std::size_t i = 0; i < host_table::shard_count; ++i) locks[i] = std::unique_lock(table_.at(i).mutex);
    closed_ = true;
    // Every parked waiter's timer gets a poke; each then sees closed_ and leaves.
    wakeups wake;
    for (auto& s : table_.shards())
        s.entries.for_each([&wake](host_entry& e) { e.g.for_each_waiter([&wake](gate::waiter& w) { wake.add(&w); }); });
    for (auto& l : locks) l.unlock();
    wake.poke();
}

}  // namespace politeproxy
