#pragma once
// Blocking or long work (a reload's reads, the admin answers built over every host) run
// on a thread pool while the worker's coroutine waits without blocking its executor.
// Include it in .cpp files only.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>

#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>

namespace politeproxy {

/// Runs `work()` on `pool` and waits for its result up to `deadline`. Nothing at the
/// deadline, or when the waiting coroutine is cancelled: work already running then
/// finishes in the background and its result is dropped; work not yet started is
/// skipped (destroyed without running). What `work` throws is thrown in the waiting
/// coroutine (a pool thread would terminate the process). `work` must own everything it
/// touches, or the pool must be joined before what it refers to goes.
/// The caller resumes on its own executor. Pass `work` as a named closure, moved: GCC 12
/// destroys a temporary closure in a co_await expression twice.
template <class Work>
task<std::optional<std::invoke_result_t<Work&>>> off_thread(boost::asio::thread_pool& pool, Work work,
                                                             clock::time_point deadline) {
    using result = std::invoke_result_t<Work&>;
    // Shared by the waiting coroutine and the pool thread; the timer is only touched on
    // the coroutine's executor.
    struct pending {
        explicit pending(executor ex) : timer(std::move(ex)) {}
        steady_timer timer;
        std::mutex mutex;
        std::optional<result> r;
        std::exception_ptr error;  ///< what work() threw
        bool abandoned = false;    ///< the waiter gave up
    };
    auto p = std::make_shared<pending>(co_await boost::asio::this_coro::executor);
    p->timer.expires_at(deadline);
    boost::asio::post(pool, [p, work = std::move(work)]() mutable {
        {
            std::lock_guard lock(p->mutex);
            if (p->abandoned) return;
        }
        try {
            auto r = work();
            std::lock_guard lock(p->mutex);
            p->r.emplace(std::move(r));
        } catch (...) {
            std::lock_guard lock(p->mutex);
            p->error = std::current_exception();
        }
        auto ex = p->timer.get_executor();
        boost::asio::post(ex, [p] { p->timer.cancel(); });
    });
    for (;;) {
        auto [ec] = co_await p->timer.async_wait(use_tuple);
        const auto state = co_await boost::asio::this_coro::cancellation_state;
        const bool give_up = !ec || state.cancelled() != boost::asio::cancellation_type::none;  // the deadline, or cancelled
        std::lock_guard lock(p->mutex);
        if (p->error) std::rethrow_exception(p->error);
        if (p->r) co_return std::move(p->r);
        if (give_up) {
            p->abandoned = true;
            co_return std::nullopt;
        }
    }
}

}  // namespace politeproxy
