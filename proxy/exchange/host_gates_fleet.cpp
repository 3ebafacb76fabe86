// host_gates: the fleet line (a lease from the store after the local slot and token), the store's ups and downs.
#include "host_gates_parts.hpp"

#include "politeproxy/base/error.hpp"
#include "politeproxy/fleet/fleet_client.hpp"
#include "politeproxy/policy/fleet_lease.hpp"

#include <boost/asio/this_coro.hpp>

namespace politeproxy {
namespace asio = boost::asio;
using namespace gates_detail;

void host_gates::publish_locked(const host_entry& e, clock::time_point now) const {
    if (!fleet_ || fleet_down_.load(std::memory_order_acquire)) return;
    const auto pause = e.health.paused_until() > now ? e.health.paused_until() - now : clock::duration::zero();
    fleet_->publish(e.key, e.health.limit(), e.health.rate(), pause);
}

bool host_gates::fleet_needs_lease() const { return fleet_ && !fleet_down_.load(std::memory_order_acquire); }

bool host_gates::fleet_fails_closed() const {
    return fleet_ && fleet_->config().on_store_failure == fleet_config::failure_mode::fail_closed;
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
        auto now = time_.now();
        auto wake_at = deadline;
        if (head) {
            const auto answer = co_await fleet_->acquire(e.key, terms);
            now = time_.now();
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
        const auto armed = time_.arm(w->timer, wake_at);
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
    const auto start = time_.now();
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
    const auto now = time_.now();
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
    const auto now = time_.now();
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

void host_gates::attach_fleet(fleet::fleet_client& f) {
    fleet_ = &f;
    fleet_down_since_.store(time_.now().time_since_epoch().count(), std::memory_order_release);
    fleet_down_.store(!f.store_up(), std::memory_order_release);
}

void host_gates::fleet_store_changed(bool up) {
    if (!up) {
        fleet_down_since_.store(time_.now().time_since_epoch().count(), std::memory_order_release);
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
    e.fleet_seen_at = time_.now();
}

void host_gates::tick(clock::time_point now) {
    if (!fleet_ || !fleet_hold_pending_.load(std::memory_order_acquire)) return;
    const clock::time_point since{clock::duration(fleet_down_since_.load(std::memory_order_acquire))};
    if (now < since + fleet_->config().lease_ttl) return;
    fleet_hold_pending_.store(false, std::memory_order_release);
    if (fleet_down_.load(std::memory_order_acquire))
        for_each_entry_reapplying([](host_entry&, clock::time_point, wake_list&) {});  // the hold is over: the share applies
}

}  // namespace politeproxy
