#include "politeproxy/host_gates.hpp"

#include "politeproxy/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

namespace politeproxy {
namespace asio = boost::asio;

namespace {

std::size_t shard_of(const std::string& key, std::size_t count) {
    return std::hash<std::string>{}(key) % count;
}

// A parked request: the gate's intrusive node plus the timer its coroutine sleeps on.
struct async_waiter : gate::waiter, std::enable_shared_from_this<async_waiter> {
    explicit async_waiter(asio::any_io_executor ex) : timer(std::move(ex)) {}
    asio::steady_timer timer;
};

using wake_list = std::vector<std::shared_ptr<async_waiter>>;

// Runs the gate under the caller's lock and keeps the waiters it woke alive until
// the caller, after unlocking, pokes them.
void advance_locked(gate& g, clock::time_point now, wake_list& wake) {
    thread_local std::vector<gate::waiter*> woken;
    woken.clear();
    g.advance(now, woken);
    for (gate::waiter* w : woken) wake.push_back(static_cast<async_waiter*>(w)->shared_from_this());
}

// The timer is only touched on the waiter's own executor (its session's strand), so the
// poke runs there: it interrupts the wait and the coroutine re-reads its state.
void poke(wake_list& wake) {
    for (auto& w : wake) {
        auto& timer = w->timer;
        asio::post(timer.get_executor(), [w = std::move(w)] { w->timer.cancel(); });
    }
    wake.clear();
}

clock::duration retry_after_hint(const gate& g) {
    // Roughly how long the queue ahead needs to drain at the host's rate.
    const double seconds = std::ceil(static_cast<double>(g.waiting() + 1) / g.limits().rate);
    return std::chrono::seconds(static_cast<long>(std::clamp(seconds, 1.0, 3600.0)));
}

}  // namespace

host_entry::host_entry(std::string k, std::shared_ptr<const host_policy> p, clock::time_point now)
    : key(std::move(k)),
      policy(std::move(p)),
      g(gate_limits{policy->concurrency, policy->rate, policy->burst, policy->queue.max_waiting}, now),
      last_used(now),
      shard(0) {}

host_gates::host_gates(std::shared_ptr<const config> cfg) : config_(std::move(cfg)) {}

std::shared_ptr<const config> host_gates::current_config() const { return config_; }

std::shared_ptr<host_entry> host_gates::find_or_create(shard& s, const std::string& key,
                                                       clock::time_point now) {
    auto it = s.entries.find(key);
    if (it != s.entries.end()) return it->second;
    std::shared_ptr<const host_policy> policy(config_, &config_->policy_for(key, utc_today()));
    auto entry = std::make_shared<host_entry>(key, std::move(policy), now);
    const_cast<std::size_t&>(entry->shard) = static_cast<std::size_t>(&s - shards_.data());
    s.entries.emplace(key, entry);
    return entry;
}

asio::awaitable<acquire_result> host_gates::acquire(std::string key) {
    auto w = std::make_shared<async_waiter>(co_await asio::this_coro::executor);
    shard& s = shards_[shard_of(key, shard_count)];
    std::shared_ptr<host_entry> entry;
    wake_list wake;
    const auto start = clock::now();
    {
        std::lock_guard lock(s.mutex);
        entry = find_or_create(s, key, start);
        entry->last_used = start;
        if (!entry->g.enqueue(*w, start)) {
            ++entry->outcomes[static_cast<std::size_t>(outcome::rejected)];
            co_return acquire_result{{}, errc::queue_full, retry_after_hint(entry->g)};
        }
        advance_locked(entry->g, start, wake);
    }
    poke(wake);

    // Whatever ends this coroutine without a permit (deadline, cancellation, an exception
    // thrown by a cancelled co_await) takes the waiter out of the gate.
    struct leave_guard {
        host_gates* self;
        host_entry* entry;
        async_waiter* w;
        ~leave_guard() {
            if (self) self->cancel(*entry, *w);
        }
    } guard{this, entry.get(), w.get()};

    const auto deadline = start + entry->policy->queue.max_wait;
    for (;;) {
        clock::time_point wake_at;
        const auto now = clock::now();
        {
            std::lock_guard lock(s.mutex);
            if (w->state() == gate::waiter_state::departed) {
                guard.self = nullptr;
                co_return acquire_result{permit(this, std::move(entry), now - start), {}, {}};
            }
            if (now >= deadline) {
                ++entry->outcomes[static_cast<std::size_t>(outcome::rejected)];
                co_return acquire_result{{}, errc::queue_timeout, retry_after_hint(entry->g)};
            }
            wake_at = std::min(deadline, w->wake_at());
        }
        w->timer.expires_at(wake_at);
        auto [ec] = co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec) {
            // A poke cancels the timer too; only the coroutine's own cancellation state
            // says the caller gave up.
            if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
                co_return acquire_result{{}, errc::cancelled, {}};
            continue;
        }
        if (w->wake_at() <= clock::now()) {  // our token is due: run the gate
            std::lock_guard lock(s.mutex);
            advance_locked(entry->g, clock::now(), wake);
        }
        poke(wake);
    }
}

void host_gates::cancel(host_entry& entry, gate::waiter& w) {
    wake_list wake;
    {
        std::lock_guard lock(shards_[entry.shard].mutex);
        if (w.state() == gate::waiter_state::departed)
            entry.g.release(clock::now());  // granted as its requester gave up: pass it on
        else
            entry.g.cancel(w);
        advance_locked(entry.g, clock::now(), wake);
    }
    poke(wake);
}

void host_gates::release(host_entry& entry, outcome how) {
    wake_list wake;
    {
        std::lock_guard lock(shards_[entry.shard].mutex);
        const auto now = clock::now();
        entry.g.release(now);
        ++entry.outcomes[static_cast<std::size_t>(how)];
        entry.last_used = now;
        advance_locked(entry.g, now, wake);
    }
    poke(wake);
}

std::size_t host_gates::evict_idle(clock::time_point now, clock::duration idle_for) {
    std::size_t evicted = 0;
    for (auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        evicted += std::erase_if(s.entries, [&](const auto& kv) {
            const host_entry& e = *kv.second;
            return now - e.last_used >= idle_for && e.g.idle(now);
        });
    }
    return evicted;
}

std::size_t host_gates::size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        n += s.entries.size();
    }
    return n;
}

std::vector<host_snapshot> host_gates::snapshot() const {
    std::vector<host_snapshot> out;
    for (const auto& s : shards_) {
        std::lock_guard lock(s.mutex);
        for (const auto& [key, e] : s.entries)
            out.push_back({key, e->g.in_flight(), e->g.waiting(), e->g.limit(), e->g.limits().rate, e->outcomes});
    }
    return out;
}

// ---- permit ----

permit::permit(permit&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      entry_(std::move(other.entry_)),
      queue_wait_(other.queue_wait_),
      outcome_(other.outcome_) {}

permit& permit::operator=(permit&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = std::exchange(other.owner_, nullptr);
        entry_ = std::move(other.entry_);
        queue_wait_ = other.queue_wait_;
        outcome_ = other.outcome_;
    }
    return *this;
}

permit::~permit() { reset(); }

void permit::reset() {
    if (entry_) owner_->release(*entry_, outcome_);
    entry_.reset();
    owner_ = nullptr;
}

const std::string& permit::key() const { return entry_->key; }
const host_policy& permit::policy() const { return *entry_->policy; }

}  // namespace politeproxy
