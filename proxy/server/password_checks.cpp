#include "politeproxy/server/password_checks.hpp"

#include "politeproxy/base/off_thread.hpp"
#include "politeproxy/policy/proxy_users.hpp"

#include <openssl/crypto.h>

#include <utility>

namespace politeproxy {

password_checks::password_checks(std::size_t max_pending, clock::duration max_wait)
    : max_pending_(max_pending), max_wait_(max_wait) {}

password_checks::~password_checks() {
    pool_.stop();
    pool_.join();
}

namespace {

// One place in the count, given back when the work is destroyed: after it ran, or when
// it was skipped or never posted.
struct pending_place {
    std::atomic<std::size_t>* count;
    explicit pending_place(std::atomic<std::size_t>& c) : count(&c) {}
    pending_place(pending_place&& other) noexcept : count(std::exchange(other.count, nullptr)) {}
    pending_place& operator=(pending_place&&) = delete;
    ~pending_place() {
        if (count) count->fetch_sub(1, std::memory_order_relaxed);
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

task<password_checks::result> password_checks::check(std::shared_ptr<const proxy_users> users,
                                                      std::string proxy_authorization) {
    wiped_string value(std::move(proxy_authorization));
    if (pending_.fetch_add(1, std::memory_order_relaxed) >= max_pending_) {
        pending_.fetch_sub(1, std::memory_order_relaxed);
        co_return result{{}, true};
    }
    // A named closure: GCC 12 destroys a temporary closure in a co_await expression twice.
    // check() looks in the memory first: the same credentials queued twice hash once.
    auto work = [place = pending_place(pending_), users = std::move(users), value = std::move(value)] {
        return users->check(value.s);
    };
    auto verdict = co_await off_thread(pool_, std::move(work), clock::now() + max_wait_);
    if (!verdict) co_return result{{}, true};
    co_return result{std::move(*verdict), false};
}

}  // namespace politeproxy
