#pragma once
#include "politeproxy/base/clock.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace politeproxy {

/// What one process enforces for a host while the fleet store is unreachable
/// (`on_store_failure: local_share`): its share of the fleet's limit and rate.
///
/// Algorithm. `limit / expected_workers` (at least 1) and `rate / expected_workers`, so
/// a fleet of `expected_workers` processes never presents more than the limit to the
/// origin, rounding aside. Right after the store went away, requests the other
/// processes sent before it did may still be running: a process that saw, in its last
/// answer from the store (at most lease_ttl old), `others` leases held elsewhere takes
/// only what is left of the limit, `min(share, limit - others)`, possibly nothing,
/// until lease_ttl has passed since the store was lost; then its share.
struct fleet_share {
    static std::size_t limit(std::size_t limit, std::size_t workers);
    static double rate(double rate, std::size_t workers);
    /// During the hold after the store was lost; may be 0.
    static std::size_t limit_during_hold(std::size_t limit, std::size_t workers, std::size_t others);
};

/// This process's leases in the fleet store: ids, and when each is due for renewal.
///
/// Algorithm. A lease is renewed once a third of lease_ttl has passed since it was
/// taken or last renewed; with a round trip bounded by fleet.timeout (at most a third
/// of the TTL), a running request's lease never has less than a third of its TTL left.
/// A request shorter than a third of the TTL is never renewed. Leases taken while the store was unreachable are kept here too, and
/// `take_all` hands every lease over for re-assertion when the store is back.
///
/// Sans-io; ids are `<process tag>:<counter>`, unique across the fleet as long as tags
/// are. Locking: none; the owner serialises calls.
class lease_book {
public:
    using id = std::uint64_t;
    /// Leases of one host key due for renewal, at most most_per_batch (one command each:
    /// a command's arguments are bounded).
    using batch = std::pair<std::string, std::vector<id>>;
    static constexpr std::size_t most_per_batch = 48;

    explicit lease_book(std::uint64_t process_tag);

    id next_id() { return ++counter_; }
    /// The lease's member name in the store.
    std::string member(id lease) const;

    void add(id lease, std::string_view key, clock::time_point now);
    /// False when it was not (or no longer) held.
    bool remove(id lease);
    std::size_t size() const { return leases_.size(); }

    /// The leases renewed at least `every` ago, grouped by key; they count as renewed now.
    std::vector<batch> due(clock::time_point now, clock::duration every);
    /// Every lease, grouped by key (re-assertion); they count as renewed now.
    std::vector<batch> take_all(clock::time_point now);

private:
    struct held {
        std::string key;
        clock::time_point renewed;
    };
    std::string tag_;
    id counter_ = 0;
    std::unordered_map<id, held> leases_;
};

}  // namespace politeproxy
