// host_gates: the host table: lookup (and the gate key), reload, eviction of idle hosts, HTTP/2
// stream ceilings, the admin snapshot.
#include "host_gates_parts.hpp"

#include "politeproxy/policy/public_suffixes.hpp"

namespace politeproxy {
namespace asio = boost::asio;
using namespace gates_detail;

host_counts& host_counts::operator+=(const host_counts& o) {
    for (std::size_t i = 0; i < outcomes.size(); ++i) outcomes[i] += o.outcomes[i];
    for (std::size_t i = 0; i < limit_changes.size(); ++i) limit_changes[i] += o.limit_changes[i];
    would_have_waited += o.would_have_waited;
    return *this;
}

std::string_view name_of(rate_source s) {
    switch (s) {
    case rate_source::adaptive: return "adaptive";
    case rate_source::robots: return "robots";
    case rate_source::config: break;
    }
    return "config";
}

host_entry::host_entry(std::string k, std::shared_ptr<const host_policy> p, const host_override* o,
                       clock::time_point now)
    : key(std::move(k)),
      policy(std::move(p)),
      override_entry(o),
      g(gate_limits{policy->concurrency, policy->rate, policy->burst, policy->queue.max_waiting, policy->enforce}, now),
      health(*policy, now),
      last_used(now) {}

host_gates::host_gates(std::shared_ptr<const config> cfg, time_source time, std::uint64_t seed)
    : time_(time),
      config_(std::move(cfg)), robots_(config_->robots.cache_ttl, config_->robots.max_delay) {
    for (auto& s : shards_) s.random.seed(static_cast<std::minstd_rand::result_type>(seed++));
}

const std::string& host_gates::gate_key(const config& cfg, const std::string& host_key, const std::string& address,
                                         std::string& storage) const {
    if (cfg.key == config::key_kind::host) return host_key;
    if (cfg.key == config::key_kind::ip) return address;
    if (!cfg.suffixes) return host_key;  // a config made without the loader (tests)
    storage = cfg.suffixes->registrable_domain(host_key);
    return storage;
}

void host_gates::join_domain_group(const config& cfg, host_entry& e) {
    e.domain_group = nullptr;
    e.domain_group_key.clear();
    if (!cfg.groups.domain || !e.policy->enforce || !cfg.suffixes) return;
    e.domain_group_key = cfg.suffixes->registrable_domain(e.key);
    std::lock_guard lock(groups_.mutex());
    e.domain_group = groups_.find_or_create(cfg.groups, group_gates::level::domain, e.domain_group_key);
}

std::shared_ptr<const config> host_gates::current_config() const {
    std::lock_guard lock(config_mutex_);
    return config_;
}

std::shared_ptr<host_entry> host_gates::find_or_create(shard& s, const std::string& key, clock::time_point now) {
    auto it = s.entries.find(key);
    if (it != s.entries.end()) return it->second;
    const auto cfg = current_config();
    const host_override* o = cfg->override_for(key, utc_today());
    std::shared_ptr<const host_policy> policy(cfg, o ? &o->policy : &cfg->defaults);
    auto entry = std::make_shared<host_entry>(key, std::move(policy), o, now);
    join_domain_group(*cfg, *entry);
    // Made while the fleet store is unreachable (or before it was ever reached): the
    // local share from the start, as every host that lived through the outage has.
    if (fleet_ && fleet_down_.load(std::memory_order_acquire)) apply_health(*entry, now);
    if (cfg->robots.honor) {
        std::lock_guard lock(robots_mutex_);
        entry->robots_rate = robots_.rate_cap(key, now);  // read before this gate was last forgotten
        if (entry->robots_rate) apply_health(*entry, now);
    }
    entry->shard = static_cast<std::size_t>(&s - shards_.data());
    s.entries.emplace(key, entry);
    return entry;
}

void host_gates::set_config(std::shared_ptr<const config> cfg) {
    {
        std::lock_guard lock(config_mutex_);
        config_ = cfg;
    }
    {
        std::lock_guard lock(robots_mutex_);
        robots_.configure(cfg->robots.cache_ttl, cfg->robots.max_delay);
    }
    {
        std::vector<group_gate::waiter*> granted;
        wakeups wake;
        std::lock_guard lock(groups_.mutex());
        groups_.set_caps(cfg->groups, granted);
        wake.add(granted);  // under the lock, as in leave_groups
    }
    const auto today = utc_today();
    for_each_entry_reapplying([&](host_entry& e, clock::time_point now, wakeups&) {
        const host_override* o = cfg->override_for(e.key, today);
        e.policy = std::shared_ptr<const host_policy>(cfg, o ? &o->policy : &cfg->defaults);
        e.override_entry = o;
        if (!cfg->robots.honor) e.robots_rate.reset();
        join_domain_group(*cfg, e);  // requests parked already keep the groups they chose
        const auto limit = e.health.limit();
        const auto rate = e.health.rate();
        e.health.reconfigure(*e.policy, now);
        if (e.health.limit() != limit || e.health.rate() != rate) publish_locked(e, now);
    });
}

std::size_t host_gates::evict_idle(clock::time_point now, clock::duration idle_for, const evicted_fn& on_evicted) {
    std::size_t evicted = 0;
    for (auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        evicted += std::erase_if(s.entries, [&](const auto& kv) {
            const host_entry& e = *kv.second;
            if (now - e.last_used < idle_for || !e.g.idle(now) || e.health.paused_until() > now) return false;
            if (!e.h2_sessions.empty()) return false;  // its stream ceiling lasts as long as its sessions
            if (on_evicted) on_evicted(kv.first, host_counts{e.outcomes, e.limit_changes, e.g.would_have_waited()});
            return true;
        });
    }
    std::lock_guard lock(groups_.mutex());
    groups_.evict_idle();  // after the hosts: they refer to their domain's group
    return evicted;
}

namespace {

std::optional<std::size_t> lowest_ceiling(const host_entry& e) {
    std::optional<std::size_t> lowest;
    for (const auto& [session, ceiling] : e.h2_sessions)
        if (ceiling && (!lowest || *ceiling < *lowest)) lowest = ceiling;
    return lowest;
}

}  // namespace

void host_gates::set_stream_ceiling(const std::string& key, const void* session, std::optional<std::size_t> streams) {
    shard& s = shards_[shard_of(key, shard_count)];
    wakeups wake;
    std::lock_guard lock(s.mutex);
    const auto now = time_.now();
    auto entry = find_or_create(s, key, now);
    auto& sessions = entry->h2_sessions;
    const auto it = std::find_if(sessions.begin(), sessions.end(), [&](const auto& p) { return p.first == session; });
    if (it == sessions.end())
        sessions.emplace_back(session, streams);
    else
        it->second = streams;
    entry->h2 = true;
    const auto ceiling = lowest_ceiling(*entry);
    if (entry->stream_ceiling == ceiling) return;
    entry->stream_ceiling = ceiling;
    apply_health(*entry, now);
    wake.run_gate(*entry, now);
}

void host_gates::forget_stream_ceiling(const std::string& key, const void* session) {
    shard& s = shards_[shard_of(key, shard_count)];
    wakeups wake;
    std::lock_guard lock(s.mutex);
    const auto found = s.entries.find(key);
    if (found == s.entries.end()) return;  // forgotten while idle: nothing holds a ceiling
    host_entry& entry = *found->second;
    std::erase_if(entry.h2_sessions, [&](const auto& p) { return p.first == session; });
    entry.h2 = !entry.h2_sessions.empty();
    const auto ceiling = lowest_ceiling(entry);
    if (entry.stream_ceiling == ceiling) return;
    const auto now = time_.now();
    entry.stream_ceiling = ceiling;
    apply_health(entry, now);
    wake.run_gate(entry, now);
}

std::size_t host_gates::size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        n += s.entries.size();
    }
    return n;
}

std::vector<host_snapshot> host_gates::snapshot(clock::time_point now) const {
    std::vector<host_snapshot> out;
    for (const auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        for (const auto& [key, e] : s.entries) {
            host_snapshot h;
            h.key = key;
            // A request waiting for its fleet lease holds a local slot but is not at the origin.
            h.in_flight = e->g.in_flight() - e->fleet.size();
            h.fleet_in_flight = e->fleet.held();
            h.waiting = e->g.waiting() + e->fleet.size();
            h.limit = e->g.limit();
            h.configured_limit = e->policy->concurrency;
            h.stream_ceiling = e->stream_ceiling;
            h.h2 = e->h2;
            h.rate = e->g.limits().rate;
            h.configured_rate = e->policy->rate;
            h.rate_from = e->robots_rate && *e->robots_rate < e->health.rate() ? rate_source::robots
                          : h.rate < h.configured_rate                       ? rate_source::adaptive
                                                                             : rate_source::config;
            const auto paused_until = e->health.paused_until();  // a robots.txt hold is not a pause
            h.paused_for = paused_until > now ? paused_until - now : clock::duration::zero();
            h.p95 = e->health.p95();
            h.baseline = e->health.baseline();
            h.epoch_latency = e->health.epoch_latency();
            h.last_reason = e->health.last_reason();
            h.since_last_change = now - e->health.last_change();
            if (e->override_entry) h.override_reason = e->override_entry->reason;
            if (e->domain_group) {
                std::lock_guard group_lock(groups_.mutex());
                const group_gate& g = *e->domain_group;
                h.domain_group = host_snapshot::group_view{e->domain_group_key, g.in_flight(), g.waiting(), g.limit()};
            }
            h.enforce = e->policy->enforce;
            h.would_have_waited = e->g.would_have_waited();
            h.outcomes = e->outcomes;
            h.limit_changes = e->limit_changes;
            out.push_back(std::move(h));
        }
    }
    return out;
}

}  // namespace politeproxy
