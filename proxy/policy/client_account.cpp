#include "politeproxy/policy/client_account.hpp"

namespace politeproxy {

void client_account::set_limits(unsigned weight, std::size_t max_waiting, std::size_t max_in_flight) {
    weight_.store(weight, std::memory_order_relaxed);
    max_waiting_.store(max_waiting, std::memory_order_relaxed);
    max_in_flight_.store(max_in_flight, std::memory_order_relaxed);
}

bool client_account::try_wait() {
    auto n = waiting_.load(std::memory_order_relaxed);
    do {
        if (n >= max_waiting_.load(std::memory_order_relaxed)) return false;
    } while (!waiting_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return true;
}

bool client_account::try_hold() {
    auto n = in_flight_.load(std::memory_order_seq_cst);
    do {
        if (n >= max_in_flight_.load(std::memory_order_relaxed)) return false;
    } while (!in_flight_.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst));
    return true;
}

bool client_account::unhold() {
    // seq_cst: a gate that saw the cap registers itself, then looks at the count again
    // (exchange/client_book); this decrement and that look cannot both miss each other.
    const auto before = in_flight_.fetch_sub(1, std::memory_order_seq_cst);
    return before >= max_in_flight_.load(std::memory_order_relaxed);
}

std::array<std::uint64_t, outcome_count> client_account::outcomes() const {
    std::array<std::uint64_t, outcome_count> out{};
    for (std::size_t i = 0; i < outcome_count; ++i) out[i] = outcomes_[i].load(std::memory_order_relaxed);
    return out;
}

}  // namespace politeproxy
