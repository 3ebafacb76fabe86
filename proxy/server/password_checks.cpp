#include "politeproxy/server/password_checks.hpp"

#include "politeproxy/base/off_thread.hpp"
#include "politeproxy/policy/proxy_users.hpp"

#include <openssl/crypto.h>

namespace politeproxy {

password_checks::password_checks(std::size_t max_pending, clock::duration max_wait)
    : max_pending_(max_pending), max_wait_(max_wait) {}

password_checks::~password_checks() {
    pool_.stop();
    pool_.join();
}

task<password_checks::result> password_checks::check(std::shared_ptr<const proxy_users> users,
                                                      std::string proxy_authorization) {
    if (pending_.fetch_add(1, std::memory_order_relaxed) >= max_pending_) {
        pending_.fetch_sub(1, std::memory_order_relaxed);
        co_return result{{}, true};
    }
    // The count falls when the check ends, also one whose waiter gave up at max_wait.
    // (A named closure: GCC 12 destroys a temporary closure in a co_await expression twice.)
    auto work = [this, users = std::move(users), value = std::move(proxy_authorization)]() mutable {
        auto user = users->check(value);
        OPENSSL_cleanse(value.data(), value.size());
        pending_.fetch_sub(1, std::memory_order_relaxed);
        return user;
    };
    auto verdict = co_await off_thread(pool_, std::move(work), clock::now() + max_wait_);
    if (!verdict) co_return result{{}, true};
    co_return result{std::move(*verdict), false};
}

}  // namespace politeproxy
