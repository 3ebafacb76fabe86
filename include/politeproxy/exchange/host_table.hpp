#pragma once
// The host table: the state kept for each tracked host key, sharded by key, with what
// the table alone decides (how many, which are idle enough to forget) and shows (the
// admin snapshot). host_gates creates entries (exchange/host_gates.hpp: a new entry takes
// its config, groups and robots.txt cap) and drives their gates.
#include "politeproxy/base/block_arena.hpp"
#include "politeproxy/base/clock.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/host_map.hpp"
#include "politeproxy/policy/adaptive_limit.hpp"
#include "politeproxy/policy/fleet_line.hpp"
#include "politeproxy/policy/gate.hpp"
#include "politeproxy/policy/group_gate.hpp"
#include "politeproxy/policy/live_override.hpp"
#include "politeproxy/policy/outcome.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace politeproxy {

class group_gates;
class host_gates;

inline constexpr std::size_t limit_change_count = 3;  ///< up, down, collapse

/// The HTTP/2 sessions open to a host's origins, each with its SETTINGS_MAX_CONCURRENT_STREAMS
/// (none: no limit).
using h2_session_ceilings = std::vector<std::pair<const void*, std::optional<std::size_t>>>;

/// groups.domain: the gate of a host's registrable domain, and that domain.
struct domain_membership {
    std::string key;
    std::shared_ptr<group_gate> gate;
};

/// allocate_shared's block for a host_entry (libstdc++, 64-bit): a vtable pointer and two
/// 32-bit counts, then the entry; the whole in 704 bytes (11 cache lines; tcmalloc's size
/// class of that size held them before the arena: its next is 768).
inline constexpr std::size_t host_entry_counts = 16;
inline constexpr std::size_t host_entry_block = 704;

/// The blocks host entries are made in (base/block_arena.hpp: on huge pages), for the
/// process's life: entries outlive any one table.
block_arena& host_entry_blocks();
/// allocate_shared<host_entry>(host_entry_allocator{}, ...): the entry and its counts in
/// one of host_entry_blocks().
using host_entry_allocator = arena_allocator<host_entry, host_entry_blocks>;

/// The state kept for one host key while it is tracked. A million idle hosts hold one
/// each: what hosts do not use in the default config (HTTP/2 sessions, a domain group) is
/// held by pointer, so that allocate_shared's block (this and its counts) stays within
/// host_entry_block.
struct host_entry : std::enable_shared_from_this<host_entry> {
    host_entry(std::string k, std::shared_ptr<const host_policy> p, const host_override* o, clock::time_point now);

    const std::string key;
    host_gates* owner = nullptr;  ///< whose gates (a client's freed slot runs this gate again: client_book)
    std::shared_ptr<const host_policy> policy;  ///< aliases the config it came from
    const host_override* override_entry;        ///< in that config; null for defaults
    gate g;
    adaptive_limit health;
    std::array<std::uint64_t, outcome_count> outcomes{};
    std::array<std::uint64_t, limit_change_count> limit_changes{};
    clock::time_point last_used;
    /// The HTTP/2 sessions open to its origins (one host key may have several: http and
    /// https, a session per worker; null: none, and its requests go over HTTP/1.1). An
    /// origin's ceiling lasts as long as its sessions.
    std::unique_ptr<h2_session_ceilings> h2_sessions;
    /// The lowest of those ceilings: the gate's limit never exceeds it.
    std::optional<std::size_t> stream_ceiling;
    bool robots_hold = false;  ///< its robots.txt is being read: nobody else departs meanwhile
    std::uint8_t shard = 0;    ///< its shard of the host table (the small fields sit together: a million hosts)
    /// groups.domain: its registrable domain's gate (null: no cap, or observe-only).
    std::unique_ptr<const domain_membership> domain;
    std::optional<double> robots_rate;  ///< robots.txt's Crawl-delay allows at most this rate
    /// Its live override (the admin API's; its policy has it on top), and the pause it sets.
    std::shared_ptr<const live_override> api_override;
    clock::time_point api_pause_until{};
    /// Until when it is paused, by its health or an operator (a robots.txt hold is not a pause).
    clock::time_point paused_until() const { return std::max(health.paused_until(), api_pause_until); }

    /// With a fleet store: its requests waiting for a lease, and what the store last said.
    fleet_line fleet;
};

/// Where a host's rate comes from: as configured, lowered by its health (or shared out by
/// the fleet), or capped by its robots.txt Crawl-delay.
enum class rate_source : std::uint8_t { config, adaptive, robots };
std::string_view name_of(rate_source s);

/// What one tracked host looks like to the metrics and status views.
struct host_snapshot {
    std::string key;
    std::size_t in_flight = 0;
    std::optional<std::size_t> fleet_in_flight;  ///< across the fleet, at the store's last answer
    std::optional<bool> fleet_store_up;          ///< with a fleet: the store's node for this host is reachable
    std::size_t waiting = 0;
    std::size_t limit = 0;  ///< the gate's: health's limit, capped by the stream ceiling
    std::size_t configured_limit = 0;
    std::optional<std::size_t> stream_ceiling;
    bool h2 = false;  ///< the upstream protocol: HTTP/2, else HTTP/1.1
    struct group_view {
        std::string key;
        std::size_t in_flight = 0, waiting = 0, limit = 0;
    };
    std::optional<group_view> domain_group;  ///< groups.domain: its domain's group, shared with other hosts
    struct client_queue {
        std::string client;  ///< the client's name; "" for requests of nobody (the proxy's own robots.txt fetch)
        std::size_t waiting = 0;
        unsigned weight = 1;
        bool at_cap = false;  ///< set aside: its client is at clients.max_in_flight
    };
    std::vector<client_queue> clients;  ///< the slot queue's lanes (clients:), busiest first
    double rate = 0;
    double configured_rate = 0;
    rate_source rate_from = rate_source::config;
    clock::duration paused_for{};  ///< remaining pause, zero when not paused
    std::optional<clock::duration> p95;
    std::optional<clock::duration> baseline;       ///< no-load latency
    std::optional<clock::duration> epoch_latency;  ///< mean at the current limit
    change_reason last_reason = change_reason::none;
    clock::duration since_last_change{};
    std::string override_reason;
    std::string_view override_source;  ///< "api", "registry", or empty: none
    std::shared_ptr<const live_override> api_override;  ///< the admin API's override, if any
    bool enforce = true;
    std::uint64_t would_have_waited = 0;
    std::array<std::uint64_t, outcome_count> outcomes{};
    std::array<std::uint64_t, limit_change_count> limit_changes{};
};

/// What a scrape of /metrics reads of every host: the counters of its series and its two
/// gauges that "_other" sums. The ~500 bytes of a host_snapshot are taken only of the
/// hosts with series of their own (half a gigabyte at a million hosts, this a third).
struct host_series_row {
    std::string key;
    std::size_t in_flight = 0;
    std::size_t waiting = 0;
    clock::time_point paused_until{};  ///< by its health or an operator (not a robots.txt hold)
    bool enforce = true;
    std::uint64_t would_have_waited = 0;
    std::array<std::uint64_t, outcome_count> outcomes{};
    std::array<std::uint64_t, limit_change_count> limit_changes{};
};

/// What a host has counted so far: the counters of its series.
struct host_counts {
    std::array<std::uint64_t, outcome_count> outcomes{};
    std::array<std::uint64_t, limit_change_count> limit_changes{};
    std::uint64_t would_have_waited = 0;

    template <class Host>  // host_snapshot or host_series_row
    static host_counts of(const Host& h) { return {h.outcomes, h.limit_changes, h.would_have_waited}; }
    host_counts& operator+=(const host_counts& o);
    template <class Host>
    void fill(Host& into) const {
        into.outcomes = outcomes;
        into.limit_changes = limit_changes;
        into.would_have_waited = would_have_waited;
    }
    bool operator==(const host_counts&) const = default;
};

/// Every tracked host's entry, in 16 shards by key.
///
/// Locking: each shard's mutex guards its map and every entry in it (and the entry's
/// gate); the caller takes it (`locate(key).s.mutex`, `at(entry.shard).mutex`) around lookups
/// and changes. size and snapshot take each shard's lock in turn; a pass in slices takes
/// one shard's for each slice.
class host_table {
public:
    struct shard {
        mutable std::mutex mutex;
        host_map entries;  ///< by the entry's own key: one copy per host
        std::minstd_rand random;  ///< backoff jitter
    };
    static constexpr std::size_t shard_count = 16;

    explicit host_table(std::uint64_t seed);

    /// Where a key is filed: its shard (by the low bits of the hash its shard's map files
    /// it under) and that hash, so that a lookup hashes its key once.
    struct place {
        shard& s;
        const std::string& key;
        std::size_t hash;
    };
    /// `key`'s place. Asks the CPU for the key's first slot in its shard meanwhile: among
    /// a million hosts it is a cache miss, which then overlaps taking the shard's lock.
    place locate(const std::string& key);
    place locate(std::string&&) = delete;  ///< the place refers to its key
    shard& at(std::size_t index) { return shards_[index]; }  ///< an entry's (host_entry::shard)
    std::array<shard, shard_count>& shards() { return shards_; }
    /// Under the place's shard lock: its key's entry, or null.
    std::shared_ptr<host_entry> find(const place& at) const;
    /// Under the place's shard lock: tracks `entry` (of its key), noting its shard in it.
    void insert(const place& at, std::shared_ptr<host_entry> entry);

    std::size_t size() const;
    /// Where a pass in slices (evict_idle_some, host_gates::reapply_config) stands: the
    /// shard and the slot it goes on from, and that shard's layout when its pass began
    /// (an insert, or the shrink at the end of an eviction pass, may move every entry
    /// between slices: the shard's pass starts again, so none is missed).
    struct pass_cursor {
        std::size_t shard = 0, slot = 0;
        std::uint64_t layout_at_start = 0;
        bool done() const { return shard == shard_count; }
    };
    /// Under the lock of `at`'s shard (`at` not done): the slots [first, second) of its
    /// next slice (at most `slots`, none only in a shard without any), `at` moved past
    /// them (to the next shard after the last slot).
    static std::pair<std::size_t, std::size_t> take_slice(const shard& s, pass_cursor& at, std::size_t slots);
    /// One slice of an eviction pass: forgets the entries idle (see gate::idle) for at
    /// least `idle_for` among at most `slots` slots of one shard from `at`, which
    /// moves on, telling `on_evicted` (under the shard's lock) each one's final counts.
    /// The shard's lock is held for that slice only, and what it evicted is destroyed
    /// after the lock is released: a million idle hosts go in slices, between which the
    /// caller's loop serves. Returns how many.
    using evicted_fn = std::function<void(const std::string& key, const host_counts& final)>;
    std::size_t evict_idle_some(pass_cursor& at, std::size_t slots, clock::time_point now,
                                clock::duration idle_for, const evicted_fn& on_evicted);
    /// Every entry as the metrics and status views show it, read in slices as
    /// series_rows; `groups`: whose lock guards the domain groups' counts.
    std::vector<host_snapshot> snapshot(clock::time_point now, const group_gates& groups, bool client_queues) const;
    /// The same of the entries of `keys` that are tracked, in that order.
    std::vector<host_snapshot> snapshot(const std::vector<std::string>& keys, clock::time_point now,
                                        const group_gates& groups, bool client_queues) const;
    /// Every entry's row for a scrape of /metrics, read `slots` slots of one shard under
    /// its lock at a time (row_slice: ~2000 hosts at a million, well under a millisecond):
    /// a worker that needs the shard meanwhile waits for one slice, not for a million
    /// hosts. A shard laid out anew between slices is read again from its first slot (its
    /// rows so far dropped); one that grows that often is read again as often.
    static constexpr std::size_t row_slice = 4096;
    std::vector<host_series_row> series_rows(std::size_t slots = row_slice) const;

private:
    shard& shard_for(std::size_t hash) { return shards_[hash % shard_count]; }
    const shard& shard_for(std::size_t hash) const { return shards_[hash % shard_count]; }
    /// A row `read(entry)` of every entry, `slots` slots of one shard under its lock at a
    /// time (series_rows says how).
    template <class Row, class Read>
    std::vector<Row> read_in_slices(std::size_t slots, Read read) const;

    std::array<shard, shard_count> shards_;
};

}  // namespace politeproxy
