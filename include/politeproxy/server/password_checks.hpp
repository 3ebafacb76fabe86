#pragma once
// Password hashing off the I/O threads: a bcrypt check takes milliseconds of CPU by design
// (hundreds at high costs), and a worker thread that hashes serves none of its other
// connections meanwhile.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace politeproxy {

class proxy_users;

/// proxy_users::check of new credentials on one thread of its own (one at a time: a flood
/// of guesses takes one core at most). One at a time also means that when a crawler opens
/// many connections at once with new credentials, the first check hashes them and the
/// rest, queued behind it, find them in proxy_users' memory.
///
/// Algorithm: each client (its address) has a queue of its own; the thread takes the
/// clients in turn (round robin), one check each. A client with nothing queued and
/// nothing hashing goes before those back for another turn, so a client that queues
/// hundreds of guesses delays another client's first check by the one hash running, not
/// by its whole queue. Bounds: `max_pending` checks queued or running in all and
/// `max_per_client` per client; a check beyond them, or one that waits longer than
/// `max_wait`, is `busy` (the request gets 503 with Retry-After: the credentials were
/// not judged); a check whose waiter gave up before it started is skipped.
///
/// Locking: one mutex over the queues and each check's result; the hash runs outside it.
/// Thread safety: check() from any worker. Destroy after the workers stopped (the
/// destructor drops queued checks and joins the thread).
class password_checks {
public:
    struct result {
        std::optional<std::string> user;  ///< the user, when the password is right
        bool busy = false;                ///< not judged: too many checks, or too slow
    };

    explicit password_checks(std::size_t max_pending = 256, std::size_t max_per_client = 16,
                             clock::duration max_wait = std::chrono::seconds(10));
    ~password_checks();
    password_checks(const password_checks&) = delete;
    password_checks& operator=(const password_checks&) = delete;

    /// `client`: who asks (the peer's address); its checks take turns with other clients'.
    task<result> check(std::shared_ptr<const proxy_users> users, std::string proxy_authorization,
                       std::string client);

    /// Checks queued or running (also those whose waiter gave up).
    std::size_t pending() const { return pending_.load(std::memory_order_relaxed); }

private:
    struct job;
    /// Runs the check whose turn it is (one is posted to the thread per check queued).
    void run_next();

    std::atomic<std::size_t> pending_{0};
    const std::size_t max_pending_;
    const std::size_t max_per_client_;
    const clock::duration max_wait_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::deque<std::shared_ptr<job>>> queues_;  ///< per client, oldest first
    std::deque<std::string> fresh_;  ///< clients whose queue was empty, the next one first
    std::deque<std::string> turns_;  ///< clients back for another turn, after the fresh ones
    std::string hashing_;            ///< the client whose check runs now (empty: none)
    boost::asio::thread_pool pool_{1};  ///< last: joined before the queues go
};

}  // namespace politeproxy
