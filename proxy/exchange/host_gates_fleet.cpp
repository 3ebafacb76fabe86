// host_gates: the fleet line (a lease from the store after the local slot and token), the store's ups and downs.
#include "host_gates_parts.hpp"

#include "politeproxy/base/error.hpp"
#include "politeproxy/fleet/fleet_client.hpp"
#include "politeproxy/policy/fleet_lease.hpp"

#include <boost/asio/this_coro.hpp>

namespace politeproxy {
namespace asio = boost::asio;
using namespace gates_detail;

namespace {

fleet_line::answer line_answer(const fleet::lease_answer& a) {
    return {a.what == fleet::lease_answer::result::granted, a.held, a.token_in, a.paused_for};
}

}  // namespace

void host_gates::publish_locked(const host_entry& e, clock::time_point now) const {
    if (!fleet_needs_lease(e.key)) return;
    const auto pause = e.health.paused_until() > now ? e.health.paused_until() - now : clock::duration::zero();
    fleet_->publish(e.key, e.health.limit(), e.health.rate(), pause);
}

bool host_gates::fleet_needs_lease(const std::string& key) const { return fleet_ && fleet_->up_for(key); }

bool host_gates::fleet_fails_closed() const {
    return fleet_ && fleet_->config().on_store_failure == fleet_config::failure_mode::fail_closed;
}


task<acquire_result> host_gates::lease(permit local, clock::time_point start) {
    local.counted_ = false;  // until leased: a timeout below counts as rejected, nothing else counts
    host_entry& e = *local.entry_;
    shard& s = table_.at(e.shard);
    const auto deadline = start + local.policy().queue.max_wait;
    auto w = std::make_shared<parked_waiter>(co_await asio::this_coro::executor);
    {
        std::lock_guard lock(s.mutex);
        e.fleet.join(*w);
    }
    struct line_guard {
        host_gates* self;
        host_entry* e;
        parked_waiter* w;
        bool granted = false;
        ~line_guard() { self->leave_fleet_line(*e, *w, granted); }
    } guard{this, &e, w.get()};

    // The line (policy/fleet_line) decides who asks and when; this loop asks and waits.
    for (;;) {
        if (!fleet_needs_lease(e.key)) co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
        bool head = false;
        fleet::lease_terms terms;
        {
            std::lock_guard lock(s.mutex);
            if (closed_) co_return acquire_result{{}, errc::shutting_down, shutdown_retry_after};
            head = e.fleet.is_head(*w);
            terms = {e.health.limit(), e.health.rate(), e.policy->burst, e.g.in_flight()};
        }
        auto now = time_.now();
        auto wake_at = deadline;
        if (head) {
            const auto answer = co_await fleet_->acquire(e.key, terms);
            now = time_.now();
            if (answer.what == fleet::lease_answer::result::store_down)
                co_return acquire_result{{}, errc::fleet_unavailable, fleet_retry_after};
            {
                wakeups wake;
                std::lock_guard lock(s.mutex);
                note_answer_locked(e, answer, local, start, now, wake);
                guard.granted = local.lease_ != 0;
                if (!guard.granted) wake_at = std::min(deadline, e.fleet.head_refused(line_answer(answer), now));
            }
            if (local.lease_) {
                local.counted_ = true;
                co_return acquire_result{std::move(local), {}, {}};
            }
        }
        if (now >= deadline) {
            std::lock_guard lock(s.mutex);
            count_rejected_locked(e, local.client_.get());
            co_return acquire_result{{}, errc::queue_timeout, retry_after_hint(e, now)};
        }
        if (!co_await sleep_until(time_, *w, wake_at)) co_return acquire_result{{}, errc::cancelled, {}};
    }
}

void host_gates::note_answer_locked(host_entry& e, const fleet::lease_answer& answer, permit& p,
                                    clock::time_point start, clock::time_point now, wakeups& wake) {
    if (answer.what == fleet::lease_answer::result::granted) {
        p.lease_ = answer.lease;
        p.queue_wait_ = now - start;
    }
    e.fleet.heard(line_answer(answer), now);
    // The fleet's shared limit, rate and pause become this host's too.
    const auto paused_until = answer.paused_for > clock::duration::zero() ? now + answer.paused_for : clock::time_point{};
    if (e.health.adopt(answer.limit, answer.rate, paused_until, now)) {
        apply_health(e, now);
        wake.run_gate(e, now);
    }
}

task<acquire_result> host_gates::acquire_leased_at_once(const std::string& key, const std::string& address,
                                                        const std::shared_ptr<client_state>& client) {
    const auto where = table_.locate(key);
    const auto start = time_.now();
    permit local;
    fleet::lease_terms terms;
    {
        wakeups wake;
        std::lock_guard lock(where.s.mutex);
        local = depart_at_once_locked(where, address, start, client, &wake);
        if (!local) co_return acquire_result{};
        local.counted_ = false;  // a miss parks: the request is counted where it ends
        const host_entry& e = *local.entry_;
        terms = {e.health.limit(), e.health.rate(), e.policy->burst, e.g.in_flight()};
    }
    const auto answer = co_await fleet_->acquire(key, terms);
    if (answer.what == fleet::lease_answer::result::store_down) co_return acquire_result{};
    const auto now = time_.now();
    {
        wakeups wake;
        std::lock_guard lock(where.s.mutex);
        note_answer_locked(*local.entry_, answer, local, start, now, wake);
    }
    if (!local.lease_) co_return acquire_result{};  // the fleet is full: park (the local slot goes back)
    local.counted_ = true;
    co_return acquire_result{std::move(local), {}, {}};
}

void host_gates::count_rejected(const std::string& key, client_state* client) {
    const auto where = table_.locate(key);
    std::lock_guard lock(where.s.mutex);
    const auto now = time_.now();
    auto entry = find_or_create(where, now);
    entry->last_used = now;
    count_rejected_locked(*entry, client);
}

void host_gates::leave_fleet_line(host_entry& e, gate::waiter& w, bool granted) {
    fleet_line::departure left;
    {
        wakeups wake;
        std::lock_guard lock(table_.at(e.shard).mutex);
        left = e.fleet.leave(w, granted);
        if (left.wake) wake.add(left.wake);  // the next one asks at once
    }
    if (left.withdraw && fleet_needs_lease(e.key)) fleet_->withdraw(e.key);
}

void host_gates::attach_fleet(fleet::fleet_client& f) { fleet_ = &f; }

void host_gates::store_lost_locked(host_entry& e, clock::time_point now) {
    e.fleet.store_reach(false, now);
    apply_health(e, now);
    // tick() lifts the hold once it is over (the latest loss's end: every earlier one's
    // too). Losses are seen on several threads: the end only ever moves later. (Sequentially
    // consistent, with tick's: either tick sees this end or it sees pending set after it.)
    const auto end = (now + fleet_->config().lease_ttl).time_since_epoch().count();
    auto seen = fleet_holds_end_.load();
    while (seen < end && !fleet_holds_end_.compare_exchange_weak(seen, end)) {
    }
    fleet_hold_pending_.store(true);
}

void host_gates::see_store_loss_locked(host_entry& e) {
    if (fleet_ && !e.fleet.store_down() && !fleet_->up_for(e.key)) store_lost_locked(e, time_.now());
}

void host_gates::fleet_store_changed() {
    // Limits move to the share (or back) where the host's node went (or came back);
    // requests waiting for a lease wake to see it.
    for_each_entry_reapplying([this](host_entry& e, clock::time_point now, wakeups& wake) {
        const bool up = fleet_->up_for(e.key);
        if (!up && !e.fleet.store_down()) store_lost_locked(e, now);
        else e.fleet.store_reach(up, now);
        e.fleet.for_each([&wake](gate::waiter& w) { wake.add(&w); });
    });
}

void host_gates::fleet_held(const std::string& key, std::size_t held) {
    const auto where = table_.locate(key);
    std::lock_guard lock(where.s.mutex);
    if (const auto e = table_.find(where)) e->fleet.heard_held(held, time_.now());
}

void host_gates::tick(clock::time_point now) {
    if (!fleet_ || !fleet_hold_pending_.load()) return;
    const auto over = [&] { return now >= clock::time_point{clock::duration(fleet_holds_end_.load())}; };
    if (!over()) return;
    fleet_hold_pending_.store(false);
    if (!over()) {  // a loss came in between: a later tick lifts its hold
        fleet_hold_pending_.store(true);
        return;
    }
    for_each_entry_reapplying([](host_entry&, clock::time_point, wakeups&) {});  // the holds are over
}

}  // namespace politeproxy
