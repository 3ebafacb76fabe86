// The gate alone: acquire + release per request, with 1, 1k, 100k and 1M hosts, in ns
// per operation, and each as a ratio to its cost at 1k hosts. Two layers:
//   gate        the sans-io gate behind a host-key map (enqueue, advance, release)
//   host_gates  the real registry: acquire coroutine + permit, on a one-thread
//               io_context with no sockets
// Requests go round robin over the hosts they use: over all of them (each one's state
// cold in the cache at a million), or over 1k of a million held (a crawl's working set
// among idle hosts: what holding a million costs the hosts in use).
// Usage: gate_bench [requests]   (not part of ctest; see tests/bench/README.md)
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/policy/gate.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;

namespace {

std::vector<std::string> host_names(std::size_t n) {
    std::vector<std::string> names;
    names.reserve(n);
    for (std::size_t i = 0; i < n; ++i) names.push_back("host" + std::to_string(i) + ".bench.test");
    return names;
}

double ns_per_op(std::chrono::steady_clock::duration d, std::size_t ops) {
    return std::chrono::duration<double, std::nano>(d).count() / static_cast<double>(ops);
}

// The names requests use: `used` of the `held`, spread evenly over the order they were made in.
std::vector<std::string> used_names(const std::vector<std::string>& held, std::size_t used) {
    if (used == 0 || used > held.size()) std::abort();
    std::vector<std::string> names;
    names.reserve(used);
    for (std::size_t i = 0; i < used; ++i) names.push_back(held[i * held.size() / used]);
    return names;
}

double bench_gate(std::size_t hosts, std::size_t used, std::size_t requests) {
    const auto held = host_names(hosts);
    const auto names = used_names(held, used);
    std::unordered_map<std::string, gate> gates;
    const auto t0 = clock::now();
    for (const auto& n : held) gates.try_emplace(n, gate_limits{2, 1e12, 1e12, 1000}, t0);
    std::vector<gate::waiter*> woken;
    gate::waiter w;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < requests; ++i) {
        const auto now = t0 + std::chrono::nanoseconds(i);
        gate& g = gates.find(names[i % used])->second;
        w = gate::waiter{};
        g.enqueue(w);
        woken.clear();
        g.advance(now, woken);
        if (w.state() != gate::waiter_state::departed) std::abort();
        g.release();
    }
    return ns_per_op(std::chrono::steady_clock::now() - start, requests);
}

double bench_host_gates(std::size_t hosts, std::size_t used, std::size_t requests) {
    auto cfg = load_config_text("defaults: { concurrency: 2, rate: 1000000000000, burst: 1000000000000 }\n", "bench");
    if (!cfg) std::abort();
    host_gates gates(std::make_shared<const config>(std::move(*cfg)));
    const auto held = host_names(hosts);
    const auto names = used_names(held, used);
    asio::io_context ioc(1);
    std::chrono::steady_clock::duration elapsed{};
    asio::co_spawn(ioc, [&]() -> task<void> {
        for (const auto& n : held) (co_await gates.acquire(n)).granted.reset();  // create every gate first
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < requests; ++i) {
            auto r = co_await gates.acquire(names[i % used]);
            if (r.ec) std::abort();
        }
        elapsed = std::chrono::steady_clock::now() - start;
    }, asio::detached);
    ioc.run();
    return ns_per_op(elapsed, requests);
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t requests = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
    std::printf("%-10s %10s %10s %12s %16s %10s\n", "layer", "hosts", "used", "requests", "ns/acquire+release",
                "/ 1k hosts");
    double gate_1k = 0, host_gates_1k = 0;
    const std::pair<std::size_t, std::size_t> rows[] = {
        {1, 1}, {1000, 1000}, {100000, 100000}, {1000000, 1000000}, {1000000, 1000}};
    for (const auto& [hosts, used] : rows) {
        const double g = bench_gate(hosts, used, requests), h = bench_host_gates(hosts, used, requests / 4);
        if (hosts == 1000) gate_1k = g, host_gates_1k = h;
        const auto ratio = [](double x, double base) {
            return base > 0 ? std::to_string(x / base).substr(0, 4) : std::string("-");  // 1 host runs before 1k
        };
        std::printf("%-10s %10zu %10zu %12zu %16.1f %10s\n", "gate", hosts, used, requests, g, ratio(g, gate_1k).c_str());
        std::printf("%-10s %10zu %10zu %12zu %16.1f %10s\n", "host_gates", hosts, used, requests / 4, h,
                    ratio(h, host_gates_1k).c_str());
    }
}
