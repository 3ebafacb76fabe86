// host_gates: what sets each host's limits: a new entry's config, groups and robots.txt cap
// (and the gate key), a reload, HTTP/2 stream ceilings. Eviction and the snapshot are the
// table's (host_table.cpp); here they take in the groups.
#include "host_gates_parts.hpp"

#include "politeproxy/fleet/fleet_client.hpp"
#include "politeproxy/policy/public_suffixes.hpp"

#include <algorithm>
#include <limits>

namespace politeproxy {
using namespace gates_detail;

const std::string& host_gates::gate_key(const config& cfg, const std::string& host_key, const std::string& address,
                                         std::string& storage) const {
    if (cfg.key == config::key_kind::host) return host_key;
    if (cfg.key == config::key_kind::ip) return address;
    if (!cfg.suffixes) return host_key;  // a config made without the loader (tests)
    storage = cfg.suffixes->registrable_domain(host_key);
    return storage;
}

void host_gates::join_domain_group(const config& cfg, host_entry& e) {
    if (!cfg.groups.domain || !e.policy->enforce || !cfg.suffixes) {
        e.domain.reset();
        return;
    }
    std::string domain = cfg.suffixes->registrable_domain(e.key);
    std::shared_ptr<group_gate> gate;
    {
        std::lock_guard lock(groups_.mutex());  // every worker's: only the lookup under it
        gate = groups_.find_or_create(cfg.groups, group_gates::level::domain, domain);
    }
    if (!gate)
        e.domain.reset();
    else if (!e.domain || e.domain->gate != gate)  // a reload keeps most memberships as they were
        e.domain = std::make_unique<const domain_membership>(std::move(domain), std::move(gate));
}

std::shared_ptr<const config> host_gates::current_config() const {
    std::lock_guard lock(config_mutex_);
    return config_;
}

std::shared_ptr<host_entry> host_gates::find_or_create(const host_table::place& where, clock::time_point now) {
    const std::string& key = where.key;
    if (auto found = table_.find(where)) return found;
    const auto cfg = current_config();
    const host_override* o = cfg->override_for(key, utc_today());
    auto live = live_for(key);
    auto entry = std::allocate_shared<host_entry>(host_entry_allocator{}, key, policy_with(cfg, o, live.get()), o, now);
    entry->owner = this;
    if (fair_.load(std::memory_order_relaxed)) apply_health(*entry, now);  // a lane per client
    if (live) {
        take_live_locked(*entry, std::move(live), now);
        apply_health(*entry, now);
    }
    join_domain_group(*cfg, *entry);
    if (cfg->robots.honor) {
        std::lock_guard lock(robots_mutex_);
        entry->robots_rate = robots_.rate_cap(key, now);  // read before this gate was last forgotten
        if (entry->robots_rate) apply_health(*entry, now);
    }
    table_.insert(where, entry);
    return entry;
}

void host_gates::set_config(std::shared_ptr<const config> cfg) {
    begin_config(std::move(cfg));
    for (host_table::pass_cursor at; !at.done();) reapply_config(at, std::numeric_limits<std::size_t>::max());
}

void host_gates::begin_config(std::shared_ptr<const config> cfg) {
    {
        std::lock_guard lock(config_mutex_);
        config_ = cfg;
    }
    {
        std::lock_guard lock(robots_mutex_);
        robots_.configure(cfg->robots.cache_ttl, cfg->robots.max_delay);
    }
    clients_.set_config(cfg->clients);
    fair_ = cfg->clients && cfg->clients->fair;  // each gate takes it as its limits are applied again, below
    {
        std::vector<group_gate::waiter*> granted;
        wakeups wake;
        std::lock_guard lock(groups_.mutex());
        groups_.set_caps(cfg->groups, granted);
        wake.add(granted);  // under the lock, as in leave_groups
    }
}

void host_gates::reapply_config(host_table::pass_cursor& at, std::size_t slots) {
    const auto cfg = current_config();
    const auto today = utc_today();
    for_some_entries_reapplying(at, slots, [&](host_entry& e, clock::time_point now, wakeups&) {
        e.override_entry = cfg->override_for(e.key, today);
        replace_policy_locked(e, policy_with(cfg, e.override_entry, e.api_override.get()), now);
        if (!cfg->robots.honor) e.robots_rate.reset();
        join_domain_group(*cfg, e);  // requests parked already keep the groups they chose
    });
}

std::size_t host_gates::evict_idle(clock::time_point now, clock::duration idle_for, const evicted_fn& on_evicted,
                                   const client_book::evicted_fn& on_client_evicted) {
    std::size_t evicted = 0;
    for (host_table::pass_cursor at; !at.done();)
        evicted += evict_idle(at, now, idle_for, on_evicted, on_client_evicted);
    return evicted;
}

std::size_t host_gates::evict_idle(host_table::pass_cursor& at, clock::time_point now, clock::duration idle_for,
                                   const evicted_fn& on_evicted, const client_book::evicted_fn& on_client_evicted,
                                   std::size_t slots) {
    const std::size_t evicted = table_.evict_idle_some(at, slots, now, idle_for, on_evicted);
    if (!at.done()) return evicted;
    clients_.evict_idle(now, idle_for, on_client_evicted);
    std::lock_guard lock(groups_.mutex());
    groups_.evict_idle();  // after the hosts: they refer to their domain's group
    return evicted;
}

std::size_t host_gates::eviction_shards_per_tick(clock::duration idle_for, clock::duration tick) {
    constexpr std::size_t shards = host_table::shard_count;
    const auto pass = idle_for / 10;
    if (tick <= clock::duration::zero() || pass <= tick) return shards;
    const auto per_tick = (static_cast<clock::rep>(shards) * tick.count() + pass.count() - 1) / pass.count();  // rounded up
    return std::clamp<std::size_t>(static_cast<std::size_t>(per_tick), 1, shards);
}

std::size_t host_gates::size() const { return table_.size(); }

namespace {
std::vector<host_snapshot> with_fleet_store(std::vector<host_snapshot> hosts, const fleet::fleet_client* fleet) {
    if (fleet)
        for (auto& h : hosts) h.fleet_store_up = fleet->up_for(h.key);
    return hosts;
}
}  // namespace

std::vector<host_snapshot> host_gates::snapshot(clock::time_point now, bool client_queues) const {
    return with_fleet_store(table_.snapshot(now, groups_, client_queues), fleet_);
}

std::vector<host_snapshot> host_gates::snapshot(const std::vector<std::string>& keys, clock::time_point now,
                                                bool client_queues) const {
    return with_fleet_store(table_.snapshot(keys, now, groups_, client_queues), fleet_);
}

std::vector<host_series_row> host_gates::series_rows(std::size_t slots) const { return table_.series_rows(slots); }

namespace {

std::optional<std::size_t> lowest_ceiling(const host_entry& e) {
    std::optional<std::size_t> lowest;
    if (!e.h2_sessions) return lowest;
    for (const auto& [session, ceiling] : *e.h2_sessions)
        if (ceiling && (!lowest || *ceiling < *lowest)) lowest = ceiling;
    return lowest;
}

}  // namespace

void host_gates::set_stream_ceiling(const std::string& key, const void* session, std::optional<std::size_t> streams) {
    const auto where = table_.locate(key);
    wakeups wake;
    std::lock_guard lock(where.s.mutex);
    const auto now = time_.now();
    auto entry = find_or_create(where, now);
    if (!entry->h2_sessions) entry->h2_sessions = std::make_unique<h2_session_ceilings>();
    auto& sessions = *entry->h2_sessions;
    const auto it = std::find_if(sessions.begin(), sessions.end(), [&](const auto& p) { return p.first == session; });
    if (it == sessions.end())
        sessions.emplace_back(session, streams);
    else
        it->second = streams;
    const auto ceiling = lowest_ceiling(*entry);
    if (entry->stream_ceiling == ceiling) return;
    entry->stream_ceiling = ceiling;
    apply_health(*entry, now);
    wake.run_gate(*entry, now);
}

void host_gates::forget_stream_ceiling(const std::string& key, const void* session) {
    const auto where = table_.locate(key);
    wakeups wake;
    std::lock_guard lock(where.s.mutex);
    const auto found = table_.find(where);
    if (!found) return;  // forgotten while idle: nothing holds a ceiling
    host_entry& entry = *found;
    if (entry.h2_sessions) {
        std::erase_if(*entry.h2_sessions, [&](const auto& p) { return p.first == session; });
        if (entry.h2_sessions->empty()) entry.h2_sessions.reset();
    }
    const auto ceiling = lowest_ceiling(entry);
    if (entry.stream_ceiling == ceiling) return;
    const auto now = time_.now();
    entry.stream_ceiling = ceiling;
    apply_health(entry, now);
    wake.run_gate(entry, now);
}

}  // namespace politeproxy
