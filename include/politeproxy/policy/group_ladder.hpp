#pragma once
#include "politeproxy/policy/group_gate.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace politeproxy {

/// The group slots one request needs after its host slot, taken one level at a time in a
/// fixed order (domain, then ip) and given back in reverse.
///
/// Why no deadlock: every request takes its slots in the same order of levels (host,
/// domain, ip) and, while parked at one level, holds only slots of the levels before it.
/// A request waiting at level k waits for a holder of a level-k slot, which holds or waits
/// only at levels after k; a cycle would need a level after itself. The queue at each
/// level is FIFO, so every waiter is reached once the slots ahead of it come back.
///
/// Sans-io. Locking: none; the owner holds the lock of every group gate it touches
/// (group_gates' mutex).
class group_ladder {
public:
    static constexpr std::size_t max_levels = 2;

    group_ladder() = default;
    /// The slots move with it; the source holds nothing after.
    group_ladder(group_ladder&& other) noexcept { take(other); }
    group_ladder& operator=(group_ladder&& other) noexcept {
        take(other);
        return *this;
    }

    /// The levels, in order; null entries are skipped. Only before anything is held.
    void set_levels(std::shared_ptr<group_gate> domain, std::shared_ptr<group_gate> ip);
    bool empty() const { return count_ == 0; }
    bool complete() const { return held_ == count_; }
    /// Holds at least one slot or is parked at a level: descend() before forgetting it.
    bool engaged(const group_gate::waiter& node) const;

    /// Every level at once when each has a free slot and nobody parked; else takes nothing.
    bool try_take_all();

    /// Climbs as far as free slots go, parking `node` at the first full level (or
    /// collecting the slot it was granted there). True when every level is held.
    bool climb(group_gate::waiter& node);

    /// Leaves the queue it is parked in and gives back every slot held, in reverse order;
    /// requests those slots then go to are appended to `granted`.
    void descend(group_gate::waiter& node, std::vector<group_gate::waiter*>& granted);

    std::size_t held() const { return held_; }
    std::size_t levels() const { return count_; }

private:
    void take(group_ladder& other) noexcept;

    std::array<std::shared_ptr<group_gate>, max_levels> levels_{};
    std::size_t count_ = 0;
    std::size_t held_ = 0;
};

}  // namespace politeproxy
