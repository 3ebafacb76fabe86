// The host table: entries by key, their eviction, the admin snapshot.
#include "politeproxy/exchange/host_table.hpp"

#include "politeproxy/exchange/group_gates.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace politeproxy {

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

static_assert(sizeof(host_entry) + host_entry_counts <= host_entry_block,
              "a million idle hosts hold one each (host_scale_bench.py)");

block_arena& host_entry_blocks() {
    static block_arena& blocks = *new block_arena(host_entry_block);  // never destroyed: see the header
    return blocks;
}

host_entry::host_entry(std::string k, std::shared_ptr<const host_policy> p, const host_override* o,
                       clock::time_point now)
    : key(std::move(k)),
      policy(std::move(p)),
      override_entry(o),
      g(gate_limits{policy->concurrency, policy->rate, policy->burst, policy->queue.max_waiting, policy->enforce}, now),
      health(*policy, now),
      last_used(now) {}

host_table::host_table(std::uint64_t seed) {
    for (auto& s : shards_) s.random.seed(static_cast<std::minstd_rand::result_type>(seed++));
}

host_table::place host_table::locate(const std::string& key) {
    const std::size_t hash = host_map::hash_of(key);
    shard& s = shard_for(hash);
    s.entries.prefetch_home(hash);
    return {s, key, hash};
}

std::shared_ptr<host_entry> host_table::find(const place& at) const {
    const auto* found = at.s.entries.find(at.key, at.hash);
    return found ? *found : nullptr;
}

void host_table::insert(const place& at, std::shared_ptr<host_entry> entry) {
    static_assert(shard_count <= 256, "host_entry::shard is one byte");
    assert(entry->key == at.key);
    entry->shard = static_cast<std::uint8_t>(&at.s - shards_.data());
    at.s.entries.insert(std::move(entry), at.hash);
}

std::size_t host_table::evict_idle_some(pass_cursor& at, std::size_t slots, clock::time_point now,
                                        clock::duration idle_for, const evicted_fn& on_evicted) {
    const std::size_t index = at.shard;
    shard& s = shards_[index];
    std::vector<std::shared_ptr<host_entry>> gone;  // destroyed after the lock
    {
        std::lock_guard lock(s.mutex);
        const auto [first, end] = take_slice(s, at, slots);
        for (std::size_t i = first; i < end; ++i) {
            const host_entry* e = s.entries.at(i);
            if (!e || now - e->last_used < idle_for || !e->g.idle(now) || e->health.paused_until() > now) continue;
            if (e->h2_sessions) continue;  // its stream ceiling lasts as long as its sessions
            if (on_evicted) on_evicted(e->key, host_counts{e->outcomes, e->limit_changes, e->g.would_have_waited()});
            gone.push_back(s.entries.extract_at(i));  // moves no other entry
        }
        if (at.shard != index) s.entries.shrink();  // its pass is over
    }
    return gone.size();
}

std::pair<std::size_t, std::size_t> host_table::take_slice(const shard& s, pass_cursor& at, std::size_t slots) {
    assert(!at.done());
    const std::size_t count = s.entries.slot_count();
    if (at.slot == 0 || at.layout_at_start != s.entries.layout()) at = {at.shard, 0, s.entries.layout()};  // (again) from its first slot
    const std::size_t first = at.slot;
    const std::size_t end = first + std::min(std::max<std::size_t>(slots, 1), count - first);
    at = end >= count ? pass_cursor{at.shard + 1, 0, 0} : pass_cursor{at.shard, end, at.layout_at_start};
    return {first, end};
}

std::size_t host_table::size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        n += s.entries.size();
    }
    return n;
}

namespace {

// Under the entry's shard lock. A request waiting for its fleet lease holds a local slot
// but is not at the origin.
std::size_t in_flight_of(const host_entry& e) { return e.g.in_flight() - e.fleet.size(); }
std::size_t waiting_of(const host_entry& e) { return e.g.waiting() + e.fleet.size(); }

// Under the entry's shard lock.
host_snapshot snapshot_of(const host_entry& e, clock::time_point now,
                          std::chrono::system_clock::time_point wall_now, const group_gates& groups, bool client_queues) {
    host_snapshot h;
    h.key = e.key;
    h.in_flight = in_flight_of(e);
    h.fleet_in_flight = e.fleet.held();
    h.waiting = waiting_of(e);
    h.limit = e.g.limit();
    h.configured_limit = e.policy->concurrency;
    h.stream_ceiling = e.stream_ceiling;
    h.h2 = e.h2_sessions != nullptr;
    h.rate = e.g.limits().rate;
    h.configured_rate = e.policy->rate;
    h.rate_from = e.robots_rate && *e.robots_rate < e.health.rate() ? rate_source::robots
                  : h.rate < h.configured_rate                       ? rate_source::adaptive
                                                                     : rate_source::config;
    const auto paused_until = e.paused_until();
    h.paused_for = paused_until > now ? paused_until - now : clock::duration::zero();
    h.p95 = e.health.p95();
    h.baseline = e.health.baseline();
    h.epoch_latency = e.health.epoch_latency();
    h.last_reason = e.health.last_reason();
    h.since_last_change = now - e.health.last_change();
    if (e.api_override && !e.api_override->expired(wall_now)) {  // one that expired goes with the next tick
        h.override_reason = e.api_override->reason;
        h.override_source = "api";
        h.api_override = e.api_override;
    } else if (e.override_entry) {
        h.override_reason = e.override_entry->reason;
        h.override_source = "registry";
    }
    if (e.domain) {
        std::lock_guard group_lock(groups.mutex());
        const group_gate& g = *e.domain->gate;
        h.domain_group = host_snapshot::group_view{e.domain->key, g.in_flight(), g.waiting(), g.limit()};
    }
    if (client_queues && e.g.limits().fair) {
        e.g.for_each_lane([&h](const client_account* c, std::size_t waiting, bool aside) {
            h.clients.push_back({c ? c->name() : std::string(), waiting, c ? c->weight() : 1u, aside});
        });
        std::sort(h.clients.begin(), h.clients.end(),
                  [](const auto& a, const auto& b) { return a.waiting != b.waiting ? a.waiting > b.waiting : a.client < b.client; });
    }
    h.enforce = e.policy->enforce;
    h.would_have_waited = e.g.would_have_waited();
    h.outcomes = e.outcomes;
    h.limit_changes = e.limit_changes;
    return h;
}

}  // namespace

template <class Row, class Read>
std::vector<Row> host_table::read_in_slices(std::size_t slots, Read read) const {
    std::vector<Row> out, slice;
    out.reserve(size());  // a million hosts' rows: not twice that while growing, unless more come
    std::size_t shard_from = 0;  // where the rows of the shard being read begin
    for (pass_cursor at; !at.done();) {
        bool again = false;
        const bool next_shard = at.slot == 0;
        {  // under the lock only the slice's rows: `out` grows (and may move) after it
            const shard& s = shards_[at.shard];
            std::lock_guard lock(s.mutex);
            again = !next_shard && at.layout_at_start != s.entries.layout();
            const auto [first, end] = take_slice(s, at, slots);
            for (std::size_t i = first; i < end; ++i)
                if (const host_entry* e = s.entries.at(i)) slice.push_back(read(*e));
        }
        if (next_shard) shard_from = out.size();
        else if (again) out.resize(shard_from);  // laid out anew: read again from its first slot
        std::move(slice.begin(), slice.end(), std::back_inserter(out));
        slice.clear();
    }
    return out;
}

std::vector<host_snapshot> host_table::snapshot(clock::time_point now, const group_gates& groups,
                                                bool client_queues) const {
    const auto wall_now = std::chrono::system_clock::now();
    return read_in_slices<host_snapshot>(row_slice, [&](const host_entry& e) {
        return snapshot_of(e, now, wall_now, groups, client_queues);
    });
}

std::vector<host_snapshot> host_table::snapshot(const std::vector<std::string>& keys, clock::time_point now,
                                                const group_gates& groups, bool client_queues) const {
    std::vector<host_snapshot> out;
    out.reserve(keys.size());
    const auto wall_now = std::chrono::system_clock::now();
    for (const auto& key : keys) {
        const std::size_t hash = host_map::hash_of(key);
        const shard& s = shard_for(hash);
        std::lock_guard lock(s.mutex);
        if (const auto* found = s.entries.find(key, hash)) out.push_back(snapshot_of(**found, now, wall_now, groups, client_queues));
    }
    return out;
}

std::vector<host_series_row> host_table::series_rows(std::size_t slots) const {
    return read_in_slices<host_series_row>(slots, [](const host_entry& e) {
        return host_series_row{e.key, in_flight_of(e), waiting_of(e), e.paused_until(), e.policy->enforce,
                               e.g.would_have_waited(), e.outcomes, e.limit_changes};
    });
}

}  // namespace politeproxy
