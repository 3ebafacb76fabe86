// The gate alone: acquire + release per request, with 1, 1k, 100k and 1M hosts, in ns
// per operation, and each as a ratio to its cost at 1k hosts. Two layers:
//   gate        the sans-io gate behind a host-key map (enqueue, advance, release)
//   host_gates  the real registry: acquire coroutine + permit, on a one-thread
//               io_context with no sockets
// Requests go over the hosts they use: all of them (each one's state cold in the cache
// at a million), or 1k of a million held (a crawl's working set among idle hosts: what
// holding a million costs the hosts in use). In two orders: round robin in the order the
// hosts were made (their entries lie in that order in memory, and the CPU's prefetchers
// follow it through the 1k rows), and a fixed shuffle of the same hosts, repeated (no
// crawl asks for its hosts in the order their entries were made); each order's ratios
// are to its own 1k row.
// Every table is made once; the rows are then measured in `rounds` interleaved rounds,
// so a ratio compares measurements seconds apart, never minutes: a row's ns is the median
// over the rounds, its ratio the median of each round's ratio to that round's 1k row
// (of its order), and the last column the lowest and highest of those ratios. A round
// of a row over no more hosts than its requests warms them first; a row over more (all
// of 1M) goes on through its hosts from round to round, each met cold. Each round also
// reads one load from memory (memory_latency): what a host met cold costs at least.
// Usage: gate_bench [requests] [rounds]   (not part of ctest; see tests/bench/README.md)
#include "politeproxy/base/huge_pages.hpp"
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/policy/gate.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
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

// A row's hosts in its order, taken on from where its last round stopped: a round of fewer
// requests than hosts goes on to the next ones, never the same first ones again. The names
// lie one after another in that order, as a request's host lies in the bytes just read:
// a proxy meets a cold host, never a cold name. (Until 2026-12-07 each name was a string
// of its own on the heap, shuffled: a cold place of the bench's own, which moved the
// all-of-1M shuffled rows by less than their rounds' spread.)
class request_order {
public:
    explicit request_order(const std::vector<std::string>& names) {
        for (const auto& n : names) {
            text_ += n;
            ends_.push_back(text_.size());
        }
    }

    std::string_view take() {
        const std::size_t begin = next_ == 0 ? 0 : ends_[next_ - 1];
        const std::string_view name(text_.data() + begin, ends_[next_] - begin);
        next_ = next_ + 1 == ends_.size() ? 0 : next_ + 1;
        return name;
    }
    /// Requests that warm the hosts a round will use: all of them twice when the round
    /// goes over them all; none when it does not (those rows read hosts gone cold).
    std::size_t warm_up(std::size_t requests) const { return ends_.size() <= requests ? 2 * ends_.size() : 0; }

private:
    std::string text_;
    std::vector<std::size_t> ends_;
    std::size_t next_ = 0;
};

// One load after another over 1 GiB of huge pages, each to the place the last one read
// names (704 bytes apart, in a random cycle): what a load that misses every cache costs
// on this machine in this round, with no TLB miss (where THP is off, 4 KiB pages add
// one, and the floor below reads high). A host whose state is in no cache
// costs one at least, so the all-of-1M shuffled rows can be no cheaper than their 1k row
// plus this.
class memory_latency {
public:
    memory_latency() : base_(static_cast<char*>(map_huge_pages(bytes))) {
        std::vector<std::uint32_t> order(bytes / stride);
        for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), std::minstd_rand(7));
        for (std::size_t i = 0; i < order.size(); ++i)
            *reinterpret_cast<std::size_t*>(base_ + order[i] * stride) = order[(i + 1) % order.size()] * stride;
    }
    ~memory_latency() { unmap_huge_pages(base_, bytes); }
    memory_latency(const memory_latency&) = delete;
    memory_latency& operator=(const memory_latency&) = delete;

    double measure(std::size_t loads) {
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < loads; ++i) at_ = *reinterpret_cast<const volatile std::size_t*>(base_ + at_);
        return ns_per_op(std::chrono::steady_clock::now() - start, loads);
    }

private:
    static constexpr std::size_t bytes = std::size_t{1} << 30, stride = 704;
    char* base_;
    std::size_t at_ = 0;
};

// The sans-io gates of `hosts` hosts behind a map.
class gate_layer {
public:
    explicit gate_layer(const std::vector<std::string>& held) {
        for (const auto& n : held) gates_.try_emplace(n, gate_limits{2, 1e12, 1e12, 1000}, t0_);
    }

    double measure(request_order& order, std::size_t requests) {
        run(order, order.warm_up(requests));
        const auto start = std::chrono::steady_clock::now();
        run(order, requests);
        return ns_per_op(std::chrono::steady_clock::now() - start, requests);
    }

private:
    void run(request_order& order, std::size_t requests) {
        gate::waiter w;
        for (std::size_t i = 0; i < requests; ++i, ++tick_) {
            key_.assign(order.take());
            gate& g = gates_.find(key_)->second;
            w = gate::waiter{};
            g.enqueue(w);
            woken_.clear();
            g.advance(t0_ + std::chrono::nanoseconds(tick_), woken_);
            if (w.state() != gate::waiter_state::departed) std::abort();
            g.release();
        }
    }

    clock::time_point t0_ = clock::now();
    std::uint64_t tick_ = 0;
    std::unordered_map<std::string, gate> gates_;
    std::string key_;  // the request's host, as a parser would leave it
    std::vector<gate::waiter*> woken_;
};

// host_gates with a gate made for each of `hosts` hosts, driven on a one-thread io_context.
class host_gates_layer {
public:
    explicit host_gates_layer(const std::vector<std::string>& held) : gates_(bench_config()) {
        go([&]() -> task<void> {
            for (const auto& n : held) (co_await gates_.acquire(n)).granted.reset();
        });
    }

    double measure(request_order& order, std::size_t requests) {
        std::chrono::steady_clock::duration elapsed{};
        go([&]() -> task<void> {
            for (std::size_t i = 0; i < order.warm_up(requests); ++i)
                if ((co_await gates_.acquire(std::string(order.take()))).ec) std::abort();
            const auto start = std::chrono::steady_clock::now();
            for (std::size_t i = 0; i < requests; ++i)
                if ((co_await gates_.acquire(std::string(order.take()))).ec) std::abort();
            elapsed = std::chrono::steady_clock::now() - start;
        });
        return ns_per_op(elapsed, requests);
    }

private:
    static std::shared_ptr<const config> bench_config() {
        auto cfg = load_config_text("defaults: { concurrency: 2, rate: 1000000000000, burst: 1000000000000 }\n", "bench");
        if (!cfg) std::abort();
        return std::make_shared<const config>(std::move(*cfg));
    }

    template <class Body>
    void go(Body body) {
        asio::co_spawn(ioc_, body, asio::detached);
        ioc_.restart();
        ioc_.run();
    }

    host_gates gates_;
    asio::io_context ioc_{1};
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t requests = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
    const std::size_t rounds = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5;
    const std::size_t host_gates_requests = requests / 4;  // a coroutine each: 4x the gate's cost and more
    if (rounds == 0 || host_gates_requests < rounds) std::abort();

    struct row {
        std::size_t hosts, used;
        bool shuffled;
        request_order gate_order, host_gates_order;  // the same hosts; each layer's own place in them
        std::vector<double> gate_ns, host_gates_ns, gate_ratio, host_gates_ratio;
    };
    std::vector<row> rows;
    std::map<std::size_t, std::vector<std::string>> held;
    std::minstd_rand random(31);
    for (const bool shuffled : {false, true})
        for (const auto& [hosts, used] : {std::pair<std::size_t, std::size_t>{1, 1}, {1000, 1000}, {100000, 100000},
                                          {1000000, 1000000}, {1000000, 1000}}) {
            if (shuffled && hosts < 1000) continue;
            if (!held.count(hosts)) held[hosts] = host_names(hosts);
            auto names = used_names(held[hosts], used);
            if (shuffled) std::shuffle(names.begin(), names.end(), random);
            rows.push_back({hosts, used, shuffled, request_order(names), request_order(names), {}, {}, {}, {}});
        }
    const auto base_of = [&](const row& r) -> const row& {  // the 1k row of the same order
        return *std::find_if(rows.begin(), rows.end(), [&](const row& b) { return b.hosts == 1000 && b.shuffled == r.shuffled; });
    };
    std::map<std::size_t, std::unique_ptr<gate_layer>> gate_layers;
    std::map<std::size_t, std::unique_ptr<host_gates_layer>> host_gates_layers;
    for (const auto& [hosts, names] : held) {
        gate_layers[hosts] = std::make_unique<gate_layer>(names);
        host_gates_layers[hosts] = std::make_unique<host_gates_layer>(names);
    }

    memory_latency memory;
    std::vector<double> memory_ns;
    for (std::size_t round = 0; round < rounds; ++round) {
        for (auto& r : rows) {
            r.gate_ns.push_back(gate_layers[r.hosts]->measure(r.gate_order, requests / rounds));
            r.host_gates_ns.push_back(host_gates_layers[r.hosts]->measure(r.host_gates_order, host_gates_requests / rounds));
        }
        memory_ns.push_back(memory.measure(host_gates_requests / rounds));
        for (auto& r : rows) {
            r.gate_ratio.push_back(r.gate_ns.back() / base_of(r).gate_ns.back());
            r.host_gates_ratio.push_back(r.host_gates_ns.back() / base_of(r).host_gates_ns.back());
        }
    }

    std::printf("%-10s %10s %10s %12s %16s %10s %12s  %s\n", "layer", "hosts", "used", "requests", "ns/acquire+release",
                "/ 1k hosts", "lowest-highest", "order");
    const auto line = [&](const char* layer, const row& r, std::size_t n, const std::vector<double>& ns,
                          const std::vector<double>& ratio) {
        const char* order = r.shuffled ? "shuffled" : "round-robin";
        if (r.hosts < 1000) {  // the 1k row is the base; one host is not compared with it
            std::printf("%-10s %10zu %10zu %12zu %16.1f %10s %12s  %s\n", layer, r.hosts, r.used, n, median(ns), "-", "-",
                        order);
            return;
        }
        const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
        std::printf("%-10s %10zu %10zu %12zu %16.1f %10.2f %7.2f-%.2f  %s\n", layer, r.hosts, r.used, n, median(ns),
                    median(ratio), *lo, *hi, order);
    };
    for (const auto& r : rows) {
        line("gate", r, requests, r.gate_ns, r.gate_ratio);
        line("host_gates", r, host_gates_requests, r.host_gates_ns, r.host_gates_ratio);
    }
    std::printf("# %zu interleaved rounds: ns is the median over them, the ratio the median of each round's\n"
                "# ratio to its 1k row, with the lowest and highest of those\n", rounds);
    // The floor of the all-of-1M shuffled rows: their 1k row and one load from memory.
    const row& shuffled_1k = *std::find_if(rows.begin(), rows.end(), [](const row& r) { return r.hosts == 1000 && r.shuffled; });
    std::vector<double> gate_floor, host_gates_floor;
    for (std::size_t i = 0; i < rounds; ++i) {
        gate_floor.push_back(1 + memory_ns[i] / shuffled_1k.gate_ns[i]);
        host_gates_floor.push_back(1 + memory_ns[i] / shuffled_1k.host_gates_ns[i]);
    }
    std::printf("# one load from memory (1 GiB of huge pages, at random): %.1f ns; so a host met cold can cost\n"
                "# no less than %.2fx (gate) and %.2fx (host_gates) its cost at 1k hosts, shuffled\n",
                median(memory_ns), median(gate_floor), median(host_gates_floor));
}
