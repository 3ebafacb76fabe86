#include "politeproxy/server/password_checks.hpp"

#include "politeproxy/policy/proxy_users.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <openssl/crypto.h>

#include <algorithm>
#include <utility>

namespace politeproxy {

namespace {

// One place in the count, given back when the work is destroyed: after it ran, or when
// it was skipped or never posted.
struct pending_place {
    std::atomic<std::size_t>* count;
    explicit pending_place(std::atomic<std::size_t>& c) : count(&c) {}
    pending_place(pending_place&& other) noexcept : count(std::exchange(other.count, nullptr)) {}
    pending_place& operator=(pending_place&&) = delete;
    ~pending_place() { release(); }
    void release() {
        if (count) std::exchange(count, nullptr)->fetch_sub(1, std::memory_order_relaxed);
    }
};

// The credentials leave no copy behind in freed memory.
struct wiped_string {
    std::string s;
    explicit wiped_string(std::string v) : s(std::move(v)) {}
    wiped_string(wiped_string&& other) noexcept : s(std::move(other.s)) {}
    wiped_string& operator=(wiped_string&&) = delete;
    ~wiped_string() { OPENSSL_cleanse(s.data(), s.size()); }
};

}  // namespace

struct password_checks::job {
    job(const executor& ex, std::shared_ptr<const proxy_users> u, std::string v, std::atomic<std::size_t>& count)
        : done(ex), users(std::move(u)), value(std::move(v)), place(count) {}
    steady_timer done;  ///< the waiter sleeps on it until max_wait; cancelled when the verdict is in
    std::shared_ptr<const proxy_users> users;
    wiped_string value;
    pending_place place;
    std::optional<std::optional<std::string>> verdict;  ///< under mutex_
    bool abandoned = false;                             ///< under mutex_: the waiter gave up
};

password_checks::password_checks(std::size_t max_pending, std::size_t max_per_client, clock::duration max_wait)
    : max_pending_(max_pending), max_per_client_(max_per_client), max_wait_(max_wait) {}

password_checks::~password_checks() {
    pool_.stop();
    pool_.join();
}

task<password_checks::result> password_checks::check(std::shared_ptr<const proxy_users> users,
                                                      std::string proxy_authorization, std::string client) {
    if (pending_.fetch_add(1, std::memory_order_relaxed) >= max_pending_) {
        pending_.fetch_sub(1, std::memory_order_relaxed);
        OPENSSL_cleanse(proxy_authorization.data(), proxy_authorization.size());
        co_return result{{}, true};
    }
    // From here the job owns the place in the count (and the credentials, wiped with it).
    auto j = std::make_shared<job>(co_await boost::asio::this_coro::executor, std::move(users),
                                   std::move(proxy_authorization), pending_);
    {
        std::lock_guard lock(mutex_);
        auto& queue = queues_[client];
        // Distinct credentials are bounded per client; the same ones again cost no hash
        // (a crawler's connections opened at once with its new credentials).
        const auto same = [&](const std::shared_ptr<job>& q) { return q->value.s == j->value.s; };
        if (queue.size() >= max_per_client_ && std::none_of(queue.begin(), queue.end(), same)) {
            co_return result{{}, true};
        }
        // A client whose check is hashing right now had its turn: it is not fresh.
        if (queue.empty()) (client == hashing_ ? turns_ : fresh_).push_back(std::move(client));
        queue.push_back(j);
    }
    boost::asio::post(pool_, [this] { run_next(); });
    j->done.expires_after(max_wait_);
    for (;;) {
        auto [ec] = co_await j->done.async_wait(use_tuple);
        const bool cancelled =
            (co_await boost::asio::this_coro::cancellation_state).cancelled() != boost::asio::cancellation_type::none;
        std::lock_guard lock(mutex_);
        if (j->verdict) co_return result{std::move(*j->verdict), false};
        if (!ec || cancelled) {  // max_wait passed, or the request went away
            j->abandoned = true;
            co_return result{{}, true};
        }
    }
}

void password_checks::run_next() {
    std::shared_ptr<job> j;
    {
        std::lock_guard lock(mutex_);
        auto& next = fresh_.empty() ? turns_ : fresh_;
        if (next.empty()) return;
        std::string client = std::move(next.front());
        next.pop_front();
        const auto it = queues_.find(client);
        j = std::move(it->second.front());
        it->second.pop_front();
        const bool more = !it->second.empty();
        if (!more) queues_.erase(it);
        if (!j->abandoned) hashing_ = client;
        if (more) turns_.push_back(std::move(client));  // its next check after every other client's
        if (j->abandoned) return;  // skipped: its place goes back with it
    }
    // check() looks in the memory first: the same credentials queued twice hash once.
    auto verdict = j->users->check(j->value.s);
    {
        std::lock_guard lock(mutex_);
        j->verdict.emplace(std::move(verdict));
        hashing_.clear();
    }
    j->place.release();  // now, not when the waiter's loop gets to it
    auto ex = j->done.get_executor();
    boost::asio::post(ex, [j = std::move(j)] { j->done.cancel(); });
}

}  // namespace politeproxy
