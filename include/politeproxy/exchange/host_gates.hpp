#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/time_source.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/client_book.hpp"
#include "politeproxy/exchange/group_gates.hpp"
#include "politeproxy/exchange/host_table.hpp"
#include "politeproxy/exchange/permit.hpp"
#include "politeproxy/exchange/robots_turn.hpp"
#include "politeproxy/policy/gate.hpp"
#include "politeproxy/policy/live_override.hpp"
#include "politeproxy/policy/outcome.hpp"
#include "politeproxy/policy/robots_book.hpp"

#include <boost/system/error_code.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace politeproxy {

namespace fleet {
class fleet_client;
struct lease_answer;
}  // namespace fleet
namespace gates_detail {
class wakeups;
}

struct acquire_result {
    permit granted;                ///< empty unless ec is clear
    boost::system::error_code ec;  ///< errc::queue_full, queue_timeout, cancelled or shutting_down
    clock::duration retry_after{};  ///< a hint for the 503
};

/// Every host's gate and health, created on first use and evicted when idle, and the
/// asynchronous acquire that parks a request until its gate grants a slot and a token.
///
/// A parked request waits on a timer it owns (its deadline, or its token's due time);
/// the gate wakes it by posting to the request's own executor. Cancelling the acquire
/// (the client went away) takes the waiter out of the queue and grants nothing; if it
/// already held a slot, the slot passes to the next waiter. `close()` (shutdown) answers
/// every parked request with errc::shutting_down and refuses new ones.
///
/// Health: a permit's `report()` feeds its host's adaptive_limit, whose limit, rate and
/// pause the gate then enforces. An HTTP/2 origin's SETTINGS_MAX_CONCURRENT_STREAMS caps
/// that limit (`set_stream_ceiling`): the excess waits in the queue, in order.
///
/// robots.txt (robots.crawl_delay: honor): `robots_due` tells the first request of an
/// origin to fetch its robots.txt and gives the fetch its slot at once when the gate is
/// free; the gate then hands out no token until the fetch's turn ends, so
/// the host's first requests wait for it; the Crawl-delay read caps the host's rate at
/// 1/delay (never raising it) for cache_ttl, also across the gate's eviction.
///
/// Groups (`groups.domain`, `groups.ip`): a request of a host whose gate enforces takes
/// its host slot, then its domain group's slot, then its address group's slot (parking in
/// each group's FIFO queue holding only the slots before it), then its host token; the
/// permit gives them back in reverse (group_ladder says why this cannot deadlock).
///
/// Fleet (attach_fleet): after its local slot and token, a request also needs a lease
/// from the fleet store. It waits for it in its host's fleet line, holding its local
/// slot, in order; only the line's head asks the store, with backoff (5 ms doubling to
/// 50 ms, re-asking at least every 200 ms to keep its place in the fleet's queue, or when
/// the store says a token or the end of a pause is due). queue.max_wait covers both
/// waits. The store's answers carry the host's shared limit, rate and pause, which the
/// host adopts; the host's own decisions (adaptive changes, a 429's collapse and pause)
/// are published to the store. While the store is unreachable, each host enforces its
/// fleet_share (local_share), or requests are answered errc::fleet_unavailable
/// (fail_closed); a request waiting for a lease then goes back to the local queue.
///
/// Clients (clients:): each request is of a client (client_book; null: nobody's); its
/// host's gate shares its slots among the clients waiting (policy/gate, Clients), and
/// counts the client's waiting and holding requests against its caps across all hosts.
/// A client's outcomes are counted with its host's.
///
/// Locking: entries are sharded by key; each shard's mutex guards its map and every gate
/// in it. No lock is held across a suspension point or while posting wake-ups. The
/// config pointer has its own mutex.
class host_gates {
public:
    /// `time`: where every reading of the gates, and of the exchanges holding their
    /// permits, comes from (base/time_source.hpp); `seed`: the backoff jitter's.
    explicit host_gates(std::shared_ptr<const config> cfg, time_source time = {},
                        std::uint64_t seed = std::random_device{}());
    ~host_gates();
    host_gates(const host_gates&) = delete;
    host_gates& operator=(const host_gates&) = delete;

    /// A permit at once if the request would not wait at all (nothing parked, a slot and
    /// a token free, not paused); empty otherwise. Never parks. `address` (groups.ip):
    /// the address the request will connect to, its ip group; empty: none.
    /// `client`: whose request (clients:); null: nobody's.
    permit try_acquire(const std::string& key, const std::string& address = {},
                       const std::shared_ptr<client_state>& client = {});

    /// Parks until granted, the host's queue.max_wait passes, shutdown, or cancellation.
    /// errc::client_queue_full: the client has clients.max_waiting requests waiting.
    task<acquire_result> acquire(std::string key, std::string address = {}, std::shared_ptr<client_state> client = {});

    /// With a fleet store up, the common case without the parking machinery: a local
    /// slot and token at once (nothing parked ahead), then a lease in one round trip.
    /// Empty, without an error, when either would wait: then acquire(). Not cancellable
    /// (it takes at most fleet.timeout).
    task<acquire_result> acquire_leased_at_once(const std::string& key, const std::string& address = {},
                                                const std::shared_ptr<client_state>& client = {});
    /// Every request for `key` needs a lease now (a fleet whose store serves it).
    bool fleet_needs_lease(const std::string& key) const;

    /// A reload: new requests use `cfg`; tracked hosts take their new limits at once,
    /// keeping their in-flight counts and parked requests.
    void set_config(std::shared_ptr<const config> cfg);
    /// The same in slices: begin_config applies the config (and the groups' and clients'
    /// settings) at once, reapply_config the tracked hosts' new limits a slice of `slots`
    /// slots of one shard at a time; call it until `at.done()`, letting the loop serve
    /// between slices (a million hosts take most of a second).
    void begin_config(std::shared_ptr<const config> cfg);
    void reapply_config(host_table::pass_cursor& at, std::size_t slots = eviction_slice);
    std::shared_ptr<const config> current_config() const;

    /// The gate key of a request for `host_key` under `cfg`: the host key itself, with
    /// `key: domain` its registrable domain (the Public Suffix List, loaded on first use),
    /// with `key: ip` the `address` it connects to. `storage` holds a computed key; the
    /// result refers to it, to `host_key` or to `address`.
    const std::string& gate_key(const config& cfg, const std::string& host_key, const std::string& address,
                                std::string& storage) const;

    /// robots.crawl_delay: honor or robots.disallow: enforce. A turn when this request for `origin` ("http://host:port")
    /// must fetch its robots.txt first, with the fetch's slot and token when the gate of
    /// `key` is free: the gate then holds its other requests until the turn ends. Decided
    /// under the gate's lock, so none of the host's requests departs between the two. A
    /// turn without a slot parks like any request (acquire), without a hold (also with a
    /// fleet: its slot needs a lease). Empty (false): not due.
    robots_turn robots_due(const std::string& origin, const std::string& key, const std::string& address);
    /// What `origin`'s robots.txt says now (policy/robots_book): its rules, or why none.
    robots_verdict robots_verdict_for(const std::string& origin);

    /// `key`'s live override (exchange/live_overrides), or none (null): its policy with the
    /// override on top (concurrency, rate) and its pause, at once if it is tracked (requests
    /// in flight finish; a lower limit admits nothing new until in flight falls under it),
    /// else when it is next tracked; kept through reloads.
    void set_live_override(const std::string& key, std::shared_ptr<const live_override> live);

    /// Shutdown: parked requests leave with errc::shutting_down, new ones are refused.
    void close();

    /// Forgets gates idle (see gate::idle) for at least `idle_for`, telling `on_evicted`
    /// (under the gate's lock) each one's final counts, and clients idle as long (telling
    /// `on_client_evicted`). Returns how many gates.
    using evicted_fn = host_table::evicted_fn;
    std::size_t evict_idle(clock::time_point now, clock::duration idle_for, const evicted_fn& on_evicted = {},
                           const client_book::evicted_fn& on_client_evicted = {});
    /// The same pass in slices of `slots` slots of the host table, each holding one
    /// shard's lock (host_table::evict_idle_some); the slice that ends the pass also
    /// forgets the idle clients and domain groups. Call until `at.done()`, letting the
    /// loop serve between calls.
    static constexpr std::size_t eviction_slice = 384;  // ~180 hosts of a million: a few ms at most (host_scale_bench)
    /// How many of the host table's shards a housekeeping tick of `tick` takes a pass
    /// over: enough for a whole pass in a tenth of `idle_for`, rounded up to whole ticks
    /// (all of them a tick when that is under one). A host idle for `idle_for` is
    /// forgotten within 1.1 times that plus a tick, and a million hosts with a TTL of
    /// minutes are not all read every second.
    static std::size_t eviction_shards_per_tick(clock::duration idle_for, clock::duration tick);
    std::size_t evict_idle(host_table::pass_cursor& at, clock::time_point now, clock::duration idle_for,
                           const evicted_fn& on_evicted, const client_book::evicted_fn& on_client_evicted,
                           std::size_t slots = eviction_slice);

    /// An HTTP/2 `session` to an origin of `key` takes at most `streams` at once (its
    /// SETTINGS_MAX_CONCURRENT_STREAMS; 0 holds every new request in the queue; nullopt:
    /// no limit). The host's ceiling is the lowest of its open sessions'. A lower ceiling
    /// never touches requests in flight, it stops replacing them; a higher one admits
    /// waiters at once. Tracks the host if it was not.
    void set_stream_ceiling(const std::string& key, const void* session, std::optional<std::size_t> streams);
    /// The session ended: its ceiling goes with it (lifted when it was the host's last).
    void forget_stream_ceiling(const std::string& key, const void* session);

    std::size_t size() const;
    /// Every tracked host; `client_queues`: with each one's per-client queues (the views
    /// show them; the metrics do not need them).
    std::vector<host_snapshot> snapshot(clock::time_point now, bool client_queues = true) const;
    /// The tracked hosts among `keys`, in that order (a key not tracked is left out).
    std::vector<host_snapshot> snapshot(const std::vector<std::string>& keys, clock::time_point now,
                                        bool client_queues = true) const;
    /// Every tracked host's row for /metrics (host_series_row): its counters and gauges summed
    /// under "_other", without the rest of a snapshot; one shard's lock held for `slots`
    /// slots at a time (host_table::series_rows).
    std::vector<host_series_row> series_rows(std::size_t slots = host_table::row_slice) const;
    /// The clients known (clients:); set_config keeps it in step with the config.
    client_book& clients() { return clients_; }
    const client_book& clients() const { return clients_; }
    const time_source& time() const { return time_; }

    /// Joins a fleet: from now on every request also needs a lease from `f`. Call once,
    /// before `f` starts and before any request; the store counts as down until `f`
    /// says it is up.
    void attach_fleet(fleet::fleet_client& f);
    /// Shutdown, once the loops stopped: permits released from now on give back no lease.
    void detach_fleet() { fleet_ = nullptr; }
    /// The fleet store, or one node of it, went away or came back (from a lane: a worker
    /// loop): each host looks at whether its own is reachable.
    void fleet_store_changed();
    /// The store said `key` holds `held` leases fleet-wide (from a lane: a worker loop).
    void fleet_held(const std::string& key, std::size_t held);
    /// Housekeeping, about once a second: after the store (a host's node) was lost, ends
    /// the hosts' holds (see fleet_share) once lease_ttl has passed.
    void tick(clock::time_point now);

private:
    friend class permit;
    friend class robots_turn;
    friend class gates_detail::wakeups;
    using shard = host_table::shard;

    std::shared_ptr<host_entry> find_or_create(const host_table::place& where, clock::time_point now);
    /// The policy a host runs under: its registry policy (`o`, else the defaults) with
    /// `live` on top; the pointer keeps `cfg` alive.
    static std::shared_ptr<const host_policy> policy_with(const std::shared_ptr<const config>& cfg,
                                                          const host_override* o, const live_override* live);
    std::shared_ptr<const live_override> live_for(const std::string& key) const;
    /// Under e's shard lock: e runs under `policy` from now on (a reload, a live override);
    /// its health takes it in, and the fleet hears of a limit or rate that moved.
    void replace_policy_locked(host_entry& e, std::shared_ptr<const host_policy> policy, clock::time_point now);
    /// Under e's shard lock: `live` becomes e's override, its pause e's.
    static void take_live_locked(host_entry& e, std::shared_ptr<const live_override> live, clock::time_point now);
    /// A robots_turn ended: see robots_turn. `held`: it held the gate.
    void robots_done(const std::string& origin, const std::string& key, const robots_read& read, bool held);
    /// Under s's lock: a permit when the key's gate lets a request leave now, with no
    /// request ahead of it (in the local queue or the fleet line); else an empty one.
    /// `wake` (declared before the lock; needed with a `client`) gets whom giving back
    /// group slots let go when the client reached its cap meanwhile.
    permit depart_at_once_locked(const host_table::place& where, const std::string& address, clock::time_point now,
                                 const std::shared_ptr<client_state>& client, gates_detail::wakeups* wake);
    task<acquire_result> acquire_local(const std::string& key, const std::string& address, clock::time_point start,
                                       const std::shared_ptr<client_state>& client);
    /// The fleet half of admission: `local` holds the slot and token; waits for a lease.
    task<acquire_result> lease(permit local, clock::time_point start);
    void leave_fleet_line(host_entry& entry, gate::waiter& w, bool granted);
    /// Takes in the store's answer (under the shard lock): the fleet's count, its shared
    /// limit, rate and pause (true when the gate's limits moved: advance it); and the
    /// lease into `p` when granted; whoever the moved limits let go goes in `wake`.
    void note_answer_locked(host_entry& e, const fleet::lease_answer& answer, permit& p, clock::time_point start,
                            clock::time_point now, gates_detail::wakeups& wake);
    bool fleet_fails_closed() const;
    /// The gate enforces what health decided, under the stream ceiling and, while the
    /// fleet store is away, the fleet share.
    void apply_health(host_entry& e, clock::time_point now) const;
    /// The store's node for `e` is lost as of `now`: the share (and the hold) from now.
    void store_lost_locked(host_entry& e, clock::time_point now);
    /// Before anything departs (each gate run, depart_at_once_locked): a node lost since
    /// the last sweep (fleet_store_changed comes after the loss) is lost now, so nothing
    /// departs under the fleet's whole limit; a host made during an outage gets the share
    /// as every host that lived through it. "Now" is the clock's, not a caller's time (a
    /// parked request's start would cut the hold short).
    void see_store_loss_locked(host_entry& e);
    /// Shares a decision of this process's health controller with the fleet.
    void publish_locked(const host_entry& e, clock::time_point now) const;
    /// Every tracked host applies its limits again (config, fleet state) and wakes who can go.
    /// `f(entry, now, wake)` runs first under the shard lock; the waiters it adds to `wake`
    /// are woken with the rest once the lock is let go (the header's locking rule).
    template <class F>
    void for_each_entry_reapplying(F&& f);
    /// The same over one slice of a pass (host_table::take_slice).
    template <class F>
    void for_some_entries_reapplying(host_table::pass_cursor& at, std::size_t slots, F&& f);
    /// `how` is counted in the host's outcomes unless the permit ended no request (`counted`).
    void release(host_entry& entry, outcome how, bool counted, std::uint64_t lease, client_state* client);
    /// A request refused without a permit (fail_closed): counted once, as rejected.
    void count_rejected(const std::string& key, client_state* client);
    /// The same under the entry's shard lock.
    static void count_rejected_locked(host_entry& entry, client_state* client);
    void report(host_entry& entry, const health_signal& signal);
    void cancel(host_entry& entry, gate::waiter& w);
    /// Gives back a request's group slots (and its place in a group queue), in reverse.
    void leave_groups(group_ladder& ladder, group_gate::waiter& node);
    /// The groups a request of `e` to `address` needs, in order (none when e observes only).
    void choose_groups(const host_entry& e, const std::string& address, group_ladder& ladder);
    /// groups.domain: `e` joins its registrable domain's gate, or none (under e's shard lock).
    void join_domain_group(const config& cfg, host_entry& e);

    const time_source time_;
    mutable std::mutex config_mutex_;
    std::shared_ptr<const config> config_;
    bool closed_ = false;  ///< guarded by every shard's mutex (set with all of them held)
    host_table table_;
    group_gates groups_;
    client_book clients_;
    std::atomic<bool> fair_{false};  ///< clients.share: fair (the gates' `fair`)
    mutable std::mutex live_mutex_;  ///< after a shard's mutex, never before it
    std::unordered_map<std::string, std::shared_ptr<const live_override>> live_;  ///< by gate key
    std::mutex robots_mutex_;  ///< after a shard's mutex, never before it
    robots_book robots_;
    fleet::fleet_client* fleet_ = nullptr;  ///< set once, before any request
    std::atomic<std::size_t> parked_{0};  ///< requests waiting at a gate, all hosts (limits.max_parked)
    std::atomic<clock::rep> fleet_holds_end_{0};   ///< clock ticks: every host's hold is over then
    std::atomic<bool> fleet_hold_pending_{false};  ///< a hold may still be running (tick re-applies)
};

}  // namespace politeproxy
