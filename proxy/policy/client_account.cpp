#include "politeproxy/policy/client_account.hpp"

namespace politeproxy {

void client_account::set_limits(unsigned weight, std::size_t max_waiting, std::size_t max_in_flight) {
    weight_.store(weight, std::memory_order_relaxed);
    max_waiting_.store(max_waiting, std::memory_order_relaxed);
    max_in_flight_.store(max_in_flight, std::memory_order_relaxed);
}

std::array<std::uint64_t, outcome_count> client_account::outcomes() const {
    std::array<std::uint64_t, outcome_count> out{};
    for (std::size_t i = 0; i < outcome_count; ++i) out[i] = outcomes_[i].load(std::memory_order_relaxed);
    return out;
}

}  // namespace politeproxy
