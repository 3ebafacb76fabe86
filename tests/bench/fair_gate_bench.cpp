// The gate's cost per request under a standing queue, with its waiting requests spread
// over 1, 10 or 1000 clients (clients.share: fair), in ns per request: a request
// finishes, the gate advances (the next one departs), a new one parks. Built twice by
// fair_gate_ab.py: against this tree's gate, and (-DPOLITEPROXY_BASELINE_GATE) against
// the gate of an earlier commit, the single FIFO queue, so both are measured in one run.
// Usage: fair_gate_bench CLIENTS [requests] [depth]   (prints ns per request)
#include "politeproxy/policy/gate.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

using namespace politeproxy;

int main(int argc, char** argv) {
    const std::size_t clients = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1;
    const std::size_t requests = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2'000'000;
    const std::size_t depth = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 2000;  // parked at the host
    const auto t0 = clock::now();
    gate_limits limits{2, 1e12, 1e12, depth + 10};
#ifndef POLITEPROXY_BASELINE_GATE
    limits.fair = clients > 0;
    std::deque<client_account> accounts;
    for (std::size_t c = 0; c < clients; ++c) accounts.emplace_back("c" + std::to_string(c), 1, depth * 2, depth * 2);
#endif
    gate g(limits, t0);
    std::vector<gate::waiter> pool(depth + limits.concurrency);
    std::deque<gate::waiter*> in_flight;
    std::vector<gate::waiter*> woken;
    std::size_t next_client = 0;
    auto park = [&](gate::waiter& w, clock::time_point now) {
        w = gate::waiter{};
#ifndef POLITEPROXY_BASELINE_GATE
        if (clients > 0) w.client = &accounts[next_client++ % clients];
        if (g.enqueue(w) != gate::queued::yes) std::abort();
#else
        if (!g.enqueue(w)) std::abort();
#endif
        woken.clear();
        g.advance(now, woken);
        for (gate::waiter* d : woken)
            if (d->state() == gate::waiter_state::departed) in_flight.push_back(d);
    };
    for (auto& w : pool) park(w, t0);
    if (in_flight.size() != limits.concurrency || g.waiting() != depth) std::abort();

    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < requests; ++i) {
        const auto now = t0 + std::chrono::nanoseconds(i);
        gate::waiter* done = in_flight.front();
        in_flight.pop_front();
#ifndef POLITEPROXY_BASELINE_GATE
        g.release(done->client);
#else
        g.release();
#endif
        park(*done, now);  // the gate advances: the next departs, this one parks again
        if (in_flight.size() != limits.concurrency) std::abort();
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
                      static_cast<double>(requests);
    std::printf("%.1f\n", ns);
    for (auto& w : pool) g.cancel(w);
    return 0;
}
