// Admission of parked requests through host_gates, the registry every request goes
// through: one host at concurrency 2 with DEPTH requests parked (coroutines on one
// io_context, each parked on its timer), their clients 1, 10 or 1000 (clients.share:
// fair); each request that departs yields once, gives its slot back (the next departs)
// and parks again. Prints ns per request. Built by fair_gate_ab.py against this tree and
// (-DPOLITEPROXY_BASELINE_GATE, no clients) against an earlier commit's build tree.
// Usage: fair_admission_bench CLIENTS [requests] [depth]
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace politeproxy;
namespace asio = boost::asio;

int main(int argc, char** argv) {
    const std::size_t clients = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1;
    const std::size_t requests = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 300'000;
    const std::size_t depth = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 2000;
    std::string yaml =
        "defaults: { concurrency: 2, rate: 1000000000000, burst: 1000000000000, "
        "queue: { max_waiting: 100000, max_wait: 1h } }\nlimits: { max_parked: 100000 }\n";
#ifndef POLITEPROXY_BASELINE_GATE
    if (clients > 0) yaml += "clients: { identify_by: address, max_waiting: 1000000, max_in_flight: 1000000 }\n";
#endif
    auto cfg = load_config_text(yaml, "bench");
    if (!cfg) {
        std::fprintf(stderr, "%s\n", cfg.error().c_str());
        return 2;
    }
    host_gates gates(std::make_shared<const config>(std::move(*cfg)));
#ifndef POLITEPROXY_BASELINE_GATE
    std::vector<std::shared_ptr<client_state>> accounts;
    for (std::size_t c = 0; c < clients; ++c)
        accounts.push_back(gates.clients().find("c" + std::to_string(c), gates.time().now()));
#endif
    asio::io_context ioc;
    std::size_t done = 0;
    bool failed = false;
    for (std::size_t d = 0; d < depth + 2; ++d)
        asio::co_spawn(ioc, [&, d]() -> task<void> {
            (void)d;
            while (done < requests) {
#ifndef POLITEPROXY_BASELINE_GATE
                std::shared_ptr<client_state> who;  // named first: no conditional inside a co_await (GCC 12)
                if (clients > 0) who = accounts[d % clients];
                auto r = co_await gates.acquire("bench.test", {}, std::move(who));
#else
                auto r = co_await gates.acquire("bench.test");
#endif
                if (r.ec) {
                    if (!failed) std::fprintf(stderr, "refused: %s\n", r.ec.message().c_str());
                    failed = true;
                    co_return;
                }
                co_await asio::post(ioc, asio::deferred);
                r.granted.set_outcome(outcome::ok);
                r.granted.reset();
                ++done;
            }
        }, asio::detached);
    const auto start = std::chrono::steady_clock::now();
    ioc.run();
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(done);
    if (failed) return 1;
    std::printf("%.1f\n", ns);
    return 0;
}
