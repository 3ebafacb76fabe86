#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/policy/public_suffixes.hpp"

#include "politeproxy/base/error.hpp"
#include "politeproxy/fleet/fleet_client.hpp"
#include "politeproxy/policy/fleet_lease.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>

namespace politeproxy {
namespace asio = boost::asio;

namespace {

std::size_t shard_of(const std::string& key, std::size_t count) {
    return std::hash<std::string>{}(key) % count;
}

// A parked request: the gate's intrusive node, its node in a group's queue, the group
// slots it holds, and the timer its coroutine sleeps on.
struct async_waiter : gate::waiter, group_gate::waiter, std::enable_shared_from_this<async_waiter> {
    explicit async_waiter(executor ex) : timer(std::move(ex)) {}
    gate::waiter& host_node() { return *this; }
    group_gate::waiter& group_node() { return *this; }
    steady_timer timer;
    group_ladder groups;
};

using wake_list = std::vector<std::shared_ptr<async_waiter>>;

void add_woken(const std::vector<group_gate::waiter*>& granted, wake_list& wake) {
    for (group_gate::waiter* w : granted) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
}

// Runs the gate under the caller's lock and keeps the waiters it woke alive until
// the caller, after unlocking, pokes them.
void advance_locked(host_entry& e, clock::time_point now, wake_list& wake) {
    std::vector<gate::waiter*> woken;
    e.g.advance(now, woken);
    for (gate::waiter* w : woken) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
}

// The timer is only touched on the waiter's own executor (its session's worker loop), so the
// poke runs there: it interrupts the wait and the coroutine re-reads its state.
void poke(wake_list& wake) {
    for (auto& w : wake) {
        auto& timer = w->timer;
        asio::post(timer.get_executor(), [w = std::move(w)] { w->timer.cancel(); });
    }
    wake.clear();
}

// Asking the store again after a refusal: 5 ms, doubling up to 50 ms; never sleeping
// longer than keepalive (or the store forgets our place in its queue: acquire_script's
// waiter_stale), unless the host is paused. A 503 for a store outage suggests this retry.
constexpr auto fleet_poll_initial = std::chrono::milliseconds(5);
constexpr auto fleet_poll_max = std::chrono::milliseconds(50);
constexpr auto fleet_place_keepalive = std::chrono::milliseconds(200);
constexpr auto fleet_retry_after = std::chrono::seconds(1);
constexpr auto parked_retry_after = std::chrono::seconds(1);

// One place among limits.max_parked, held while a request waits at a gate (whatever
// ends the wait gives it back).
class parked_place {
public:
    parked_place(std::atomic<std::size_t>& count, std::size_t max) {
        auto n = count.load(std::memory_order_relaxed);
        do {
            if (n >= max) return;
        } while (!count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
        count_ = &count;
    }
    parked_place(const parked_place&) = delete;
    parked_place& operator=(const parked_place&) = delete;
    ~parked_place() {
        if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
    }
    explicit operator bool() const { return count_ != nullptr; }

private:
    std::atomic<std::size_t>* count_ = nullptr;
};

clock::duration retry_after_hint(const host_entry& e, clock::time_point now) {
    // Roughly how long the queue ahead needs to drain, or the pause. The host serves at
    // most `rate` per second and, with responses taking p95, `limit / p95` per second.
    double per_second = e.g.limits().rate;
    if (const auto p95 = e.health.p95(); p95 && *p95 > clock::duration::zero())
        per_second = std::min(per_second, static_cast<double>(e.g.limit()) / std::chrono::duration<double>(*p95).count());
    const double seconds = std::ceil(static_cast<double>(e.g.waiting() + 1) / per_second);
    const auto drain = std::chrono::seconds(static_cast<long>(std::clamp(seconds, 1.0, 3600.0)));
    const auto paused_until = e.health.paused_until();  // not the gate's: a robots.txt hold is not a pause
    const auto pause = paused_until > now ? paused_until - now : clock::duration::zero();
    return std::max<clock::duration>(drain, pause);
}

}  // namespace

void host_gates::apply_health(host_entry& e, clock::time_point now) const {
    const host_policy& p = *e.policy;
    std::size_t limit = std::min(e.health.limit(), e.stream_ceiling.value_or(e.health.limit()));
    double rate = std::min(e.health.rate(), e.robots_rate.value_or(e.health.rate()));
    if (fleet_ && fleet_down_.load(std::memory_order_acquire)) {
        const auto& f = fleet_->config();
        const clock::time_point since{clock::duration(fleet_down_since_.load(std::memory_order_acquire))};
        const bool hold = now < since + f.lease_ttl && now - e.fleet_seen_at <= f.lease_ttl;
        limit = hold ? fleet_share::limit_during_hold(limit, f.expected_workers, e.fleet_others)
                     : fleet_share::limit(limit, f.expected_workers);
        rate = fleet_share::rate(rate, f.expected_workers);
    }
    e.g.set_limits({limit, rate, p.burst, p.queue.max_waiting, p.enforce}, now);
    e.g.set_pause(e.robots_hold ? clock::time_point::max() : e.health.paused_until());
}

std::string_view name_of(rate_source s) {
    switch (s) {
    case rate_source::adaptive: return "adaptive";
    case rate_source::robots: return "robots";
    case rate_source::config: break;
    }
    return "config";
}

void host_gates::publish_locked(const host_entry& e, clock::time_point now) const {
    if (!fleet_ || fleet_down_.load(std::memory_order_acquire)) return;
    const auto pause = e.health.paused_until() > now ? e.health.paused_until() - now : clock::duration::zero();
    fleet_->publish(e.key, e.health.limit(), e.health.rate(), pause);
}

bool host_gates::fleet_needs_lease() const { return fleet_ && !fleet_down_.load(std::memory_order_acquire); }

bool host_gates::fleet_fails_closed() const {
    return fleet_ && fleet_->config().on_store_failure == fleet_config::failure_mode::fail_closed;
}

host_entry::host_entry(std::string k, std::shared_ptr<const host_policy> p, const host_override* o,
                       clock::time_point now)
    : key(std::move(k)),
      policy(std::move(p)),
      override_entry(o),
      g(gate_limits{policy->concurrency, policy->rate, policy->burst, policy->queue.max_waiting, policy->enforce}, now),
      health(*policy, now),
      last_used(now) {}

host_gates::host_gates(std::shared_ptr<const config> cfg, std::uint64_t seed)
    : config_(std::move(cfg)), robots_(config_->robots.cache_ttl, config_->robots.max_delay) {
    for (auto& s : shards_) s.random.seed(static_cast<std::minstd_rand::result_type>(seed++));
}

host_gates::~host_gates() = default;

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

void host_gates::choose_groups(const host_entry& e, const std::string& address, group_ladder& ladder) {
    std::shared_ptr<group_gate> ip;
    if (!address.empty() && e.policy->enforce) {
        const auto cfg = current_config();
        if (cfg->groups.ip) {
            std::lock_guard lock(groups_.mutex());
            ip = groups_.find_or_create(cfg->groups, group_gates::level::ip, address);
        }
    }
    ladder.set_levels(e.domain_group, std::move(ip));
}

void host_gates::leave_groups(group_ladder& ladder, group_gate::waiter& node) {
    if (ladder.empty()) return;
    std::vector<group_gate::waiter*> granted;
    wake_list wake;
    {
        std::lock_guard lock(groups_.mutex());  // a group's grant writes the node's state
        if (!ladder.engaged(node)) return;
        ladder.descend(node, granted);
        add_woken(granted, wake);  // under the lock: a granted waiter that gives up needs it to go away
    }
    poke(wake);
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

permit host_gates::depart_at_once_locked(shard& s, const std::string& key, const std::string& address,
                                         clock::time_point now) {
    if (closed_) return {};
    auto entry = find_or_create(s, key, now);
    entry->last_used = now;
    if (entry->health.tick(now)) {
        apply_health(*entry, now);
        publish_locked(*entry, now);
    }
    // Requests already waiting for a lease go first.
    if (!entry->fleet_line.empty()) return {};
    std::unique_ptr<group_ladder> groups;  // most requests have none: nothing to allocate
    if (entry->domain_group || !address.empty()) {
        groups = std::make_unique<group_ladder>();
        choose_groups(*entry, address, *groups);
        if (groups->empty()) groups.reset();
    }
    if (groups) {
        // Every slot (host, then groups) and the token at once, or nothing.
        if (!entry->g.would_depart(now)) return {};
        std::lock_guard lock(groups_.mutex());
        if (!groups->try_take_all()) return {};
    }
    const bool departed = entry->g.try_depart(now);
    assert(departed || !groups);
    if (!departed) return {};
    auto policy = entry->policy;
    const auto epoch = entry->health.epoch();
    permit p(this, std::move(entry), std::move(policy), {}, epoch);
    p.group_slots_ = std::move(groups);
    return p;
}

permit host_gates::try_acquire(const std::string& key, const std::string& address) {
    // With the store up every request needs a lease (acquire); without it, fail_closed
    // refuses in acquire, and local_share departs on the local gate alone.
    if (fleet_ && (fleet_needs_lease() || fleet_fails_closed())) return {};
    shard& s = shards_[shard_of(key, shard_count)];
    std::lock_guard lock(s.mutex);
    permit p = depart_at_once_locked(s, key, address, clock::now());
    if (p && fleet_) {
        p.lease_ = fleet_->hold_unasserted(key);  // asserted in the store when it is back
        ++p.entry_->fleet_leased;
    }
    return p;
}

task<acquire_result> host_gates::acquire(std::string key, std::string address) {
    if (permit p = try_acquire(key, address)) co_return acquire_result{std::move(p), {}, {}};
    const auto start = clock::now();
    for (;;) {
        if (fleet_ && !fleet_needs_lease() && fleet_fails_closed()) {
            count_rejected(key);
            co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
        }
        auto local = co_await acquire_local(key, address, start);
        if (!local.granted || !fleet_) co_return local;
        if (!fleet_needs_lease()) {
            if (fleet_fails_closed()) {
                local.granted.counted_ = false;  // the slot ends no request: the refusal is counted
                count_rejected(key);
                co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
            }
            std::lock_guard lock(shards_[local.granted.entry_->shard].mutex);
            local.granted.lease_ = fleet_->hold_unasserted(key);
            ++local.granted.entry_->fleet_leased;
            co_return local;
        }
        auto leased = co_await lease(std::move(local.granted), start);
        if (leased.ec == errc::fleet_unavailable && fleet_fails_closed()) count_rejected(key);
        if (leased.ec != errc::fleet_unavailable || fleet_fails_closed()) co_return leased;
        // The store went away while the request waited for its lease: its slot went
        // back, and it parks again under the local share.
    }
}

task<acquire_result> host_gates::acquire_local(const std::string& key, const std::string& address,
                                               clock::time_point start) {
    shard& s = shards_[shard_of(key, shard_count)];
    std::shared_ptr<host_entry> entry;
    // Every parked request costs memory (a coroutine chain, its header, its connection):
    // their number across all hosts is bounded, whichever clients and hosts they are.
    const parked_place parked(parked_, current_config()->limits.max_parked);
    {
        std::lock_guard lock(s.mutex);
        if (closed_) co_return acquire_result{{}, errc::shutting_down, std::chrono::seconds(1)};
        entry = find_or_create(s, key, start);
        if (!parked) {
            ++entry->outcomes[static_cast<std::size_t>(outcome::rejected)];
            co_return acquire_result{{}, errc::parked_full, parked_retry_after};
        }
    }

    auto w = std::make_shared<async_waiter>(co_await asio::this_coro::executor);
    // Whatever ends this coroutine without a permit (deadline, cancellation, shutdown, an
    // exception thrown by a cancelled co_await) takes the waiter out of the gate.
    struct leave_guard {
        host_gates* self = nullptr;
        host_entry* entry = nullptr;
        async_waiter* w = nullptr;
        ~leave_guard() {
            if (self) self->cancel(*entry, *w);
        }
    } guard;
    wake_list wake;
    clock::duration max_wait{};
    {
        std::lock_guard lock(s.mutex);
        if (closed_) co_return acquire_result{{}, errc::shutting_down, std::chrono::seconds(1)};
        max_wait = entry->policy->queue.max_wait;
        choose_groups(*entry, address, w->groups);
        if (!entry->g.enqueue(*w, !w->groups.empty())) {
            ++entry->outcomes[static_cast<std::size_t>(outcome::rejected)];
            co_return acquire_result{{}, errc::queue_full, retry_after_hint(*entry, start)};
        }
        guard.self = this;
        guard.entry = entry.get();
        guard.w = w.get();
        advance_locked(*entry, start, wake);
    }
    poke(wake);
    const auto deadline = start + max_wait;

    for (;;) {
        clock::time_point wake_at;
        gate::waiter_state state;
        const auto now = clock::now();
        std::optional<permit> granted;
        {
            std::lock_guard lock(s.mutex);
            state = w->host_node().state();
            if (state == gate::waiter_state::departed) {
                guard.self = nullptr;
                auto policy = entry->policy;
                const auto epoch = entry->health.epoch();
                granted.emplace(permit(this, std::move(entry), std::move(policy), now - start, epoch));
                if (w->groups.complete() && !w->groups.empty())
                    granted->group_slots_ = std::make_unique<group_ladder>(std::move(w->groups));
            } else {
                if (closed_) co_return acquire_result{{}, errc::shutting_down, std::chrono::seconds(1)};
                if (now >= deadline) {
                    ++entry->outcomes[static_cast<std::size_t>(outcome::rejected)];
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
                {
                    std::lock_guard lock(s.mutex);
                    if (w->host_node().state() == gate::waiter_state::awaiting_groups) {
                        entry->g.groups_granted(*w);
                        advance_locked(*entry, clock::now(), wake);
                    }
                }
                poke(wake);
                continue;
            }
        } else if (state == gate::waiter_state::queued) {
            leave_groups(w->groups, w->group_node());  // the host took its slot back (a lowered limit)
        }
        w->timer.expires_at(wake_at);
        auto [ec] = co_await w->timer.async_wait(use_tuple);
        if (ec) {
            // A poke cancels the timer too; only the coroutine's own cancellation state
            // says the caller gave up.
            if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
                co_return acquire_result{{}, errc::cancelled, {}};
            continue;
        }
        {
            // Our token is due, or a pause ended: run the gate.
            std::lock_guard lock(s.mutex);
            const auto t = clock::now();
            if (entry->health.tick(t)) {
                apply_health(*entry, t);
                publish_locked(*entry, t);
            }
            advance_locked(*entry, t, wake);
        }
        poke(wake);
    }
}

task<acquire_result> host_gates::lease(permit local, clock::time_point start) {
    local.counted_ = false;  // until leased: a timeout below counts as rejected, nothing else counts
    host_entry& e = *local.entry_;
    shard& s = shards_[e.shard];
    const auto deadline = start + local.policy().queue.max_wait;
    auto w = std::make_shared<async_waiter>(co_await asio::this_coro::executor);
    {
        std::lock_guard lock(s.mutex);
        e.fleet_line.push_back(w.get());
    }
    struct line_guard {
        host_gates* self;
        host_entry* e;
        async_waiter* w;
        bool granted = false;
        ~line_guard() { self->leave_fleet_line(*e, *w, granted); }
    } guard{this, &e, w.get()};

    clock::duration backoff = fleet_poll_initial;
    for (;;) {
        if (!fleet_needs_lease()) co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
        bool head = false;
        fleet::lease_terms terms;
        {
            std::lock_guard lock(s.mutex);
            if (closed_) co_return acquire_result{{}, errc::shutting_down, std::chrono::seconds(1)};
            head = e.fleet_line.front() == w.get();
            terms = {e.health.limit(), e.health.rate(), e.policy->burst};
        }
        auto now = clock::now();
        auto wake_at = deadline;
        if (head) {
            const auto answer = co_await fleet_->acquire(e.key, terms);
            now = clock::now();
            if (answer.what == fleet::lease_answer::result::store_down)
                co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
            wake_list wake;
            {
                std::lock_guard lock(s.mutex);
                if (note_answer_locked(e, answer, local, start, now)) advance_locked(e, now, wake);
                guard.granted = local.lease_ != 0;
            }
            poke(wake);
            if (local.lease_) {
                local.counted_ = true;
                co_return acquire_result{std::move(local), {}, {}};
            }
            clock::duration wait = answer.paused_for;
            if (wait == clock::duration::zero()) {
                wait = std::min<clock::duration>(answer.token_in > clock::duration::zero() ? answer.token_in : backoff,
                                                 fleet_place_keepalive);
                backoff = std::min<clock::duration>(backoff * 2, fleet_poll_max);
            }
            wake_at = std::min(deadline, now + wait);
        }
        if (now >= deadline) {
            std::lock_guard lock(s.mutex);
            ++e.outcomes[static_cast<std::size_t>(outcome::rejected)];
            co_return acquire_result{{}, errc::queue_timeout, retry_after_hint(e, now)};
        }
        w->timer.expires_at(wake_at);
        auto [ec] = co_await w->timer.async_wait(use_tuple);
        if (ec && (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
            co_return acquire_result{{}, errc::cancelled, {}};
    }
}

bool host_gates::note_answer_locked(host_entry& e, const fleet::lease_answer& answer, permit& p,
                                    clock::time_point start, clock::time_point now) {
    const bool granted = answer.what == fleet::lease_answer::result::granted;
    if (granted) {
        ++e.fleet_leased;
        p.lease_ = answer.lease;
        p.queue_wait_ = now - start;
    }
    e.fleet_held = answer.held;
    e.fleet_others = answer.held > e.fleet_leased ? answer.held - e.fleet_leased : 0;
    e.fleet_seen_at = now;
    // The fleet's shared limit, rate and pause become this host's too.
    const auto paused_until = answer.paused_for > clock::duration::zero() ? now + answer.paused_for : clock::time_point{};
    if (!e.health.adopt(answer.limit, answer.rate, paused_until, now)) return false;
    apply_health(e, now);
    return true;
}

task<acquire_result> host_gates::acquire_leased_at_once(const std::string& key, const std::string& address) {
    shard& s = shards_[shard_of(key, shard_count)];
    const auto start = clock::now();
    permit local;
    fleet::lease_terms terms;
    {
        std::lock_guard lock(s.mutex);
        local = depart_at_once_locked(s, key, address, start);
        if (!local) co_return acquire_result{};
        local.counted_ = false;  // a miss parks: the request is counted where it ends
        const host_entry& e = *local.entry_;
        terms = {e.health.limit(), e.health.rate(), e.policy->burst};
    }
    const auto answer = co_await fleet_->acquire(key, terms);
    if (answer.what == fleet::lease_answer::result::store_down) co_return acquire_result{};
    const auto now = clock::now();
    wake_list wake;
    {
        std::lock_guard lock(s.mutex);
        if (note_answer_locked(*local.entry_, answer, local, start, now)) advance_locked(*local.entry_, now, wake);
    }
    poke(wake);
    if (!local.lease_) co_return acquire_result{};  // the fleet is full: park (the local slot goes back)
    local.counted_ = true;
    co_return acquire_result{std::move(local), {}, {}};
}

void host_gates::count_rejected(const std::string& key) {
    shard& s = shards_[shard_of(key, shard_count)];
    std::lock_guard lock(s.mutex);
    const auto now = clock::now();
    auto entry = find_or_create(s, key, now);
    entry->last_used = now;
    ++entry->outcomes[static_cast<std::size_t>(outcome::rejected)];
}

void host_gates::leave_fleet_line(host_entry& e, gate::waiter& w, bool granted) {
    wake_list wake;
    bool withdraw = false;
    {
        std::lock_guard lock(shards_[e.shard].mutex);
        const auto it = std::find(e.fleet_line.begin(), e.fleet_line.end(), &w);
        if (it == e.fleet_line.end()) return;
        const bool was_head = it == e.fleet_line.begin();
        e.fleet_line.erase(it);
        if (was_head && !e.fleet_line.empty())  // the next one asks at once
            wake.push_back(static_cast<async_waiter*>(e.fleet_line.front())->shared_from_this());
        withdraw = was_head && e.fleet_line.empty() && !granted;
    }
    poke(wake);
    if (withdraw && fleet_needs_lease()) fleet_->withdraw(e.key);
}

void host_gates::cancel(host_entry& entry, gate::waiter& w) {
    auto& self = static_cast<async_waiter&>(w);
    leave_groups(self.groups, self.group_node());  // the reverse order: groups, then the host
    wake_list wake;
    {
        std::lock_guard lock(shards_[entry.shard].mutex);
        if (w.state() == gate::waiter_state::departed)
            entry.g.release();  // granted as its requester gave up: pass it on
        else
            entry.g.cancel(w);
        advance_locked(entry, clock::now(), wake);
    }
    poke(wake);
}

void host_gates::release(host_entry& entry, outcome how, bool counted, std::uint64_t lease) {
    if (lease && fleet_) fleet_->release(entry.key, lease);  // first: the next head's acquire queues behind it
    wake_list wake;
    {
        std::lock_guard lock(shards_[entry.shard].mutex);
        const auto now = clock::now();
        entry.g.release();
        if (lease) {
            --entry.fleet_leased;
            // The store's count as this process last saw it, less what it gave back.
            if (entry.fleet_held && *entry.fleet_held > 0) --*entry.fleet_held;
        }
        if (counted) ++entry.outcomes[static_cast<std::size_t>(how)];
        entry.last_used = now;
        if (entry.health.tick(now)) {
            apply_health(entry, now);
            publish_locked(entry, now);
        }
        advance_locked(entry, now, wake);
        // One of our leases came back: the head of the fleet line may take it now.
        if (lease && !entry.fleet_line.empty())
            wake.push_back(static_cast<async_waiter*>(entry.fleet_line.front())->shared_from_this());
    }
    poke(wake);
}

void host_gates::report(host_entry& entry, const health_signal& signal) {
    wake_list wake;
    {
        shard& s = shards_[entry.shard];
        std::lock_guard lock(s.mutex);
        const auto now = clock::now();
        const auto change = entry.health.on_signal(signal, now, [&s] {
            return std::uniform_real_distribution<double>(0.0, 1.0)(s.random);
        });
        if (change == limit_change::none) return;
        ++entry.limit_changes[static_cast<std::size_t>(change) - 1];
        apply_health(entry, now);
        publish_locked(entry, now);
        advance_locked(entry, now, wake);  // a raised limit admits waiters at once
    }
    poke(wake);
}

template <class F>
void host_gates::for_each_entry_reapplying(F&& f) {
    for (auto& s : shards_) {
        wake_list wake;
        {
            std::lock_guard lock(s.mutex);
            const auto now = clock::now();
            for (auto& [key, e] : s.entries) {
                f(*e, now, wake);  // whom to wake goes in `wake`: poked once the lock is let go
                apply_health(*e, now);
                advance_locked(*e, now, wake);
            }
        }
        poke(wake);
    }
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
        wake_list wake;
        {
            std::lock_guard lock(groups_.mutex());
            groups_.set_caps(cfg->groups, granted);
            add_woken(granted, wake);  // under the lock, as in leave_groups
        }
        poke(wake);
    }
    const auto today = utc_today();
    for_each_entry_reapplying([&](host_entry& e, clock::time_point now, wake_list&) {
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

void host_gates::attach_fleet(fleet::fleet_client& f) {
    fleet_ = &f;
    fleet_down_since_.store(clock::now().time_since_epoch().count(), std::memory_order_release);
    fleet_down_.store(!f.store_up(), std::memory_order_release);
}

void host_gates::fleet_store_changed(bool up) {
    if (!up) {
        fleet_down_since_.store(clock::now().time_since_epoch().count(), std::memory_order_release);
        fleet_hold_pending_.store(true, std::memory_order_release);
    }
    fleet_down_.store(!up, std::memory_order_release);
    // Limits move to the share (or back); requests waiting for a lease wake to see it.
    for_each_entry_reapplying([](host_entry& e, clock::time_point, wake_list& wake) {
        for (gate::waiter* w : e.fleet_line) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
    });
}

void host_gates::fleet_held(const std::string& key, std::size_t held) {
    shard& s = shards_[shard_of(key, shard_count)];
    std::lock_guard lock(s.mutex);
    const auto it = s.entries.find(key);
    if (it == s.entries.end()) return;
    host_entry& e = *it->second;
    e.fleet_held = held;
    e.fleet_others = held > e.fleet_leased ? held - e.fleet_leased : 0;
    e.fleet_seen_at = clock::now();
}

void host_gates::tick(clock::time_point now) {
    if (!fleet_ || !fleet_hold_pending_.load(std::memory_order_acquire)) return;
    const clock::time_point since{clock::duration(fleet_down_since_.load(std::memory_order_acquire))};
    if (now < since + fleet_->config().lease_ttl) return;
    fleet_hold_pending_.store(false, std::memory_order_release);
    if (fleet_down_.load(std::memory_order_acquire))
        for_each_entry_reapplying([](host_entry&, clock::time_point, wake_list&) {});  // the hold is over: the share applies
}

host_gates::robots_turn host_gates::robots_due(const std::string& origin, const std::string& key,
                                               const std::string& address) {
    shard& s = shards_[shard_of(key, shard_count)];
    std::lock_guard lock(s.mutex);
    const auto now = clock::now();
    {
        std::lock_guard robots_lock(robots_mutex_);
        if (!robots_.on_request(origin, now)) return {};
    }
    robots_turn turn;
    turn.gates_ = this;
    turn.origin_ = origin;
    turn.key_ = key;
    if (fleet_) return turn;
    turn.slot = depart_at_once_locked(s, key, address, now);
    if (turn.slot) {
        turn.held_ = true;
        turn.slot.entry_->robots_hold = true;
        apply_health(*turn.slot.entry_, now);
    }
    return turn;
}

host_gates::robots_turn::robots_turn(robots_turn&& other) noexcept
    : slot(std::move(other.slot)),
      delay(other.delay),
      failed(other.failed),
      gates_(std::exchange(other.gates_, nullptr)),
      origin_(std::move(other.origin_)),
      key_(std::move(other.key_)),
      held_(other.held_) {}

host_gates::robots_turn::~robots_turn() {
    if (gates_) gates_->robots_done(origin_, key_, delay, failed, held_);
}

void host_gates::robots_done(const std::string& origin, const std::string& key, std::optional<double> delay,
                             bool failed, bool held) {
    const auto now = clock::now();
    std::optional<double> cap;
    {
        std::lock_guard lock(robots_mutex_);
        robots_.fetched(origin, key, delay, failed, now);
        cap = robots_.rate_cap(key, now);
    }
    shard& s = shards_[shard_of(key, shard_count)];
    wake_list wake;
    {
        std::lock_guard lock(s.mutex);
        const auto it = s.entries.find(key);
        if (it == s.entries.end()) return;
        host_entry& e = *it->second;
        if (held) e.robots_hold = false;  // only the fetch that set the hold lifts it
        e.robots_rate = cap;
        apply_health(e, now);
        advance_locked(e, now, wake);
    }
    poke(wake);
}

void host_gates::close() {
    std::array<std::unique_lock<std::mutex>, shard_count> locks;
    for (std::size_t i = 0; i < shard_count; ++i) locks[i] = std::unique_lock(shards_[i].mutex);
    closed_ = true;
    // Every parked waiter's timer gets a poke; each then sees closed_ and leaves.
    wake_list wake;
    for (auto& s : shards_)
        for (auto& [key, e] : s.entries) {
            thread_local std::vector<gate::waiter*> all;
            all.clear();
            e->g.for_each_waiter([](gate::waiter& w) { all.push_back(&w); });
            for (gate::waiter* w : all) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
        }
    for (auto& l : locks) l.unlock();
    poke(wake);
}

host_counts& host_counts::operator+=(const host_counts& o) {
    for (std::size_t i = 0; i < outcomes.size(); ++i) outcomes[i] += o.outcomes[i];
    for (std::size_t i = 0; i < limit_changes.size(); ++i) limit_changes[i] += o.limit_changes[i];
    would_have_waited += o.would_have_waited;
    return *this;
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
    wake_list wake;
    {
        std::lock_guard lock(s.mutex);
        const auto now = clock::now();
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
        advance_locked(*entry, now, wake);
    }
    poke(wake);
}

void host_gates::forget_stream_ceiling(const std::string& key, const void* session) {
    shard& s = shards_[shard_of(key, shard_count)];
    wake_list wake;
    {
        std::lock_guard lock(s.mutex);
        const auto found = s.entries.find(key);
        if (found == s.entries.end()) return;  // forgotten while idle: nothing holds a ceiling
        host_entry& entry = *found->second;
        std::erase_if(entry.h2_sessions, [&](const auto& p) { return p.first == session; });
        entry.h2 = !entry.h2_sessions.empty();
        const auto ceiling = lowest_ceiling(entry);
        if (entry.stream_ceiling == ceiling) return;
        const auto now = clock::now();
        entry.stream_ceiling = ceiling;
        apply_health(entry, now);
        advance_locked(entry, now, wake);
    }
    poke(wake);
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
            h.in_flight = e->g.in_flight() - e->fleet_line.size();
            h.fleet_in_flight = e->fleet_held;
            h.waiting = e->g.waiting() + e->fleet_line.size();
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
