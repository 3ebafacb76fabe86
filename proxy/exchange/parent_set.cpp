#include "politeproxy/exchange/parent_set.hpp"

#include "politeproxy/base/log.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>

namespace politeproxy {

namespace {

constexpr std::array<double, 10> bucket_bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};

}  // namespace

struct parent_state::waiter {
    explicit waiter(executor ex) : timer(std::move(ex)) {}
    steady_timer timer;
    bool granted = false;  ///< under the parent's lock
};

namespace {

// Each parent_state's own: a parent reloaded with another address or credentials under
// the same name is another state, and none of its predecessor's pooled connections or
// sessions is taken for it.
std::atomic<std::uint64_t> parent_serial{0};

}  // namespace

parent_state::parent_state(parent_config cfg, time_source time, std::uint64_t seed)
    : cfg_(std::move(cfg)), pool_key_("parent " + cfg_.name + " #" + std::to_string(++parent_serial)), time_(time),
      health_(cfg_.fail_after, cfg_.retry_after, seed) {}

bool parent_state::usable() const {
    std::lock_guard lock(lock_);
    return health_.usable(time_.now());
}

bool parent_state::up() const {
    std::lock_guard lock(lock_);
    return health_.up(time_.now());
}

clock::time_point parent_state::down_until() const {
    std::lock_guard lock(lock_);
    return health_.down_until();
}

void parent_state::failed(const logger& log, std::string_view what) {
    bool marked;
    clock::duration down_for{};
    {
        std::lock_guard lock(lock_);
        const auto now = time_.now();
        marked = health_.failed(now);
        if (marked) down_for = health_.down_until() - now;  // never down: down_until() is time_point::min()
    }
    if (marked)
        log.write(log_level::warn, "parent",
                  "parent " + cfg_.name + " (" + cfg_.authority() + ") is down for " +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(down_for).count()) +
                      " ms: " + std::string(what));
}

void parent_state::answered() {
    std::lock_guard lock(lock_);
    health_.answered(time_.now());
}

void parent_state::refused_credentials(const logger& log) {
    if (!warned_credentials_.exchange(true))
        log.write(log_level::error, "parent",
                  "parent " + cfg_.name + " (" + cfg_.authority() +
                      ") refused this proxy's credentials (407): check its url or credentials_file");
}

bool parent_state::try_take() {
    std::size_t now = busy_.load(std::memory_order_relaxed);
    do {
        if (now >= cfg_.max_connections) return false;
    } while (!busy_.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
    return true;
}

task<bool> parent_state::take(clock::time_point deadline) {
    if (try_take()) co_return true;
    auto w = std::make_shared<waiter>(co_await boost::asio::this_coro::executor);
    {
        std::lock_guard lock(lock_);
        if (try_take()) co_return true;  // one came back meanwhile (release() saw no waiter)
        waiters_.push_back(w);
    }
    // However the wait ends (the deadline, a hand-over, the coroutine cancelled or its frame
    // destroyed with its loop), the waiter leaves the queue, and a turn handed over to it
    // but not claimed goes back: no turn is lost, no timer of a gone loop stays queued.
    struct leaving {
        parent_state& p;
        const std::shared_ptr<waiter>& w;
        bool claimed = false;
        ~leaving() {
            bool hand_back = false;
            {
                std::lock_guard lock(p.lock_);
                if (w->granted)
                    hand_back = !claimed;
                else if (auto at = std::find(p.waiters_.begin(), p.waiters_.end(), w); at != p.waiters_.end())
                    p.waiters_.erase(at);
            }
            if (hand_back) p.release();
        }
    } guard{*this, w};
    w->timer.expires_at(deadline);
    co_await w->timer.async_wait(use_tuple);
    {
        std::lock_guard lock(lock_);
        guard.claimed = w->granted;  // handed over by release(): the turn is ours
    }
    co_return guard.claimed;
}

void parent_state::release() {
    std::shared_ptr<waiter> next;
    {
        std::lock_guard lock(lock_);
        if (!waiters_.empty()) {
            next = std::move(waiters_.front());
            waiters_.pop_front();
            next->granted = true;  // the turn passes to it: busy stays
        } else
            busy_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (next) boost::asio::post(next->timer.get_executor(), [next] { next->timer.cancel(); });
}

void parent_state::connected(clock::duration took) {
    const double seconds = std::chrono::duration<double>(took).count();
    for (std::size_t i = 0; i < bucket_bounds.size(); ++i)
        if (seconds <= bucket_bounds[i]) {
            connect_buckets_[i].fetch_add(1, std::memory_order_relaxed);
            break;
        }
    connects_.fetch_add(1, std::memory_order_relaxed);
    connect_micros_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

parent_state::counts parent_state::snapshot() const {
    counts c;
    for (std::size_t i = 0; i < outcome_count; ++i) c.requests[i] = requests_[i].load(std::memory_order_relaxed);
    std::uint64_t running = 0;
    for (const auto& b : connect_buckets_) c.connect_buckets.push_back(running += b.load(std::memory_order_relaxed));
    c.connects = connects_.load(std::memory_order_relaxed);
    c.connect_seconds = static_cast<double>(connect_micros_.load(std::memory_order_relaxed)) / 1e6;
    return c;
}

std::span<const double> parent_state::connect_bucket_bounds() { return bucket_bounds; }

void parent_set::update(const config& cfg) {
    auto next = std::make_shared<table>();
    const auto old = current();
    for (const parent_config& p : cfg.parents) {
        const auto same = std::find_if(old->parents.begin(), old->parents.end(),
                                       [&](const auto& s) { return s->config() == p; });
        next->parents.push_back(same != old->parents.end()
                                    ? *same
                                    : std::make_shared<parent_state>(p, time_, std::hash<std::string>{}(p.name)));
    }
    next->routes = cfg.routes;
    next->turns = std::make_unique<std::atomic<std::uint64_t>[]>(cfg.routes.size());
    std::lock_guard lock(lock_);
    table_ = std::move(next);
}

std::shared_ptr<const parent_set::table> parent_set::current() const {
    std::lock_guard lock(lock_);
    return table_;
}

way parent_set::choose(std::string_view key, std::span<const ip_bytes> addresses, const parent_state* tried) {
    const auto t = current();
    const parent_route* route = route_for(t->routes, key, addresses);
    if (!route) return {};
    // The pick is among the route's parents; `direct` in the list is where the route goes
    // when none of them is usable (alone, it is the whole route).
    std::vector<way_state> ways;
    std::vector<std::size_t> parents;
    ways.reserve(route->via.size());
    parents.reserve(route->via.size());
    bool direct = false;
    clock::time_point back = clock::time_point::max();
    for (std::size_t i : route->via) {
        if (i == parent_route::direct) {
            direct = true;
            continue;
        }
        const parent_state& p = *t->parents[i];
        const bool down = !p.usable();
        if (down) back = std::min(back, p.down_until());
        const bool usable = !down && &p != tried;
        ways.push_back({usable, p.busy(), p.config().weight, p.name()});
        parents.push_back(i);
    }
    const auto turn = t->turns[static_cast<std::size_t>(route - t->routes.data())].fetch_add(1, std::memory_order_relaxed);
    const auto picked = pick_way(route->pick, ways, key, turn);
    way w;
    if (picked) {
        w.parent = t->parents[parents[*picked]];
        return w;
    }
    if (!direct) {
        w.all_down = t->parents[parents.front()]->name();
        const clock::duration second = std::chrono::seconds(1);
        w.retry_after = back == clock::time_point::max() ? second : std::max(back - time_.now(), second);
    }
    return w;
}

std::vector<std::string> parent_set::route_names(std::string_view key) const {
    const auto t = current();
    std::vector<std::string> names;
    if (const parent_route* route = route_for(t->routes, key, {}))
        for (std::size_t i : route->via) names.push_back(i == parent_route::direct ? "direct" : t->parents[i]->name());
    return names;
}

std::vector<std::shared_ptr<parent_state>> parent_set::parents() const { return current()->parents; }

}  // namespace politeproxy
