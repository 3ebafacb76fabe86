#pragma once
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/policy/group_gate.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace politeproxy {

/// Every group key's gate (`groups.domain`, `groups.ip`), created on first use and
/// forgotten once nobody holds, waits at or refers to it.
///
/// Locking: one mutex for all of them, `mutex()`: callers hold it around every call here
/// and every call on a gate from here (group traffic is one step per request, and short).
/// Lock order: a host shard's mutex, then this one; never the reverse.
class group_gates {
public:
    enum class level : std::uint8_t { domain, ip };
    static constexpr std::size_t level_count = 2;

    std::mutex& mutex() const { return mutex_; }

    /// The gate of `key` at `level`, or null when `caps` puts no cap on that level.
    std::shared_ptr<group_gate> find_or_create(const config::group_caps& caps, level at, const std::string& key);

    /// A reload: every gate takes its level's new cap (a level whose cap went away keeps
    /// its last one until forgotten). Waiters the raised caps admit go to `granted`.
    void set_caps(const config::group_caps& caps, std::vector<group_gate::waiter*>& granted);

    /// Forgets the gates that are idle and referred to by nothing else. Returns how many.
    std::size_t evict_idle();

private:
    static std::optional<std::size_t> cap(const config::group_caps& caps, level at) {
        return at == level::domain ? caps.domain : caps.ip;
    }

    mutable std::mutex mutex_;
    std::array<std::unordered_map<std::string, std::shared_ptr<group_gate>, keyed_string_hash, std::equal_to<>>, level_count>
        gates_;
};

}  // namespace politeproxy
