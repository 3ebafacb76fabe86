#pragma once
// Password hashing off the I/O threads: a bcrypt check takes milliseconds of CPU by design
// (hundreds at high costs), and a worker thread that hashes serves none of its other
// connections meanwhile.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace politeproxy {

class proxy_users;

/// proxy_users::check of new credentials on one thread of its own (one at a time: a flood
/// of guesses takes one core at most). One at a time also means that when a crawler opens
/// many connections at once with new credentials, the first check hashes them and the
/// rest, queued behind it, find them in proxy_users' memory. At most `max_pending` checks are
/// queued or running; a check beyond them, or one that waits longer than `max_wait`, is
/// `busy` (the request gets 503 with Retry-After: the credentials were not judged), and
/// a check whose waiter gave up before it started is skipped.
///
/// Thread safety: check() from any worker. Destroy after the workers stopped (the
/// destructor drops queued checks and joins the thread).
class password_checks {
public:
    struct result {
        std::optional<std::string> user;  ///< the user, when the password is right
        bool busy = false;                ///< not judged: too many checks, or too slow
    };

    explicit password_checks(std::size_t max_pending = 256, clock::duration max_wait = std::chrono::seconds(10));
    ~password_checks();
    password_checks(const password_checks&) = delete;
    password_checks& operator=(const password_checks&) = delete;

    task<result> check(std::shared_ptr<const proxy_users> users, std::string proxy_authorization);

    /// Checks queued or running (also those whose waiter gave up).
    std::size_t pending() const { return pending_.load(std::memory_order_relaxed); }

private:
    boost::asio::thread_pool pool_{1};
    std::atomic<std::size_t> pending_{0};
    const std::size_t max_pending_;
    const clock::duration max_wait_;
};

}  // namespace politeproxy
