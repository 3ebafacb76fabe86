#pragma once
// What the host_gates tests share: a config from YAML, worker loops on threads, a yield,
// and a counter of permits held at once.
#include "politeproxy/base/executor.hpp"
#include "politeproxy/config/config_load.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace politeproxy::testing {

inline std::shared_ptr<const config> make_config(const std::string& yaml) {
    auto c = load_config_text(yaml, "test.yaml");
    REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error()));
    return std::make_shared<const config>(std::move(*c));
}

// One single-threaded loop per thread, as the proxy's workers run.
inline void run_threads(std::vector<boost::asio::io_context>& loops) {
    std::vector<std::thread> threads;
    for (auto& ioc : loops) threads.emplace_back([&ioc] { ioc.run(); });
    for (auto& t : threads) t.join();
}

// Lets every other coroutine queued on this loop run `turns` times meanwhile.
inline task<void> yield(int turns = 3) {
    for (int i = 0; i < turns; ++i)
        co_await boost::asio::post(co_await boost::asio::this_coro::executor, boost::asio::deferred);
}

// How many hold something at once, and the most that ever did.
struct peak_counter {
    std::atomic<int> now{0};
    std::atomic<int> peak{0};
    void enter() {
        const int n = ++now;
        int p = peak.load();
        while (n > p && !peak.compare_exchange_weak(p, n)) {
        }
    }
    void leave() { --now; }
};

}  // namespace politeproxy::testing
