#pragma once
// The clients this process knows (clients: in the config): each one's account, found by
// name for each request, forgotten when idle.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/policy/client_account.hpp"

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <set>
#include <vector>

namespace politeproxy {

struct host_entry;

/// A client as this process keeps it: its account (counts, weight, caps), when it was
/// last used, and the hosts whose gates set its requests aside at its max_in_flight.
///
/// A gate that set a lane aside registers its host here (await_slot) and then looks at
/// the client's count again; a slot given back while the client was at its cap runs the
/// registered gates one at a time, in the order they registered, until one takes the slot
/// (next_waiting_host: a freed slot costs one gate's turn, not one per host the client
/// waits at). Both sides use seq_cst on the count (client_account::unhold), so one of the
/// two always sees the other.
///
/// Every account a gate sees in the proxy is a client_state (host_gates takes only these).
class client_state : public client_account, public std::enable_shared_from_this<client_state> {
public:
    using client_account::client_account;

    /// `host`'s gate has a lane of this client set aside (registered once however often
    /// it says so). True when the client may hold a slot after all (a slot came back
    /// meanwhile): run the gate again.
    bool await_slot(const std::shared_ptr<host_entry>& host);
    /// The first host registered (and still tracked), taken out; null: none.
    std::shared_ptr<host_entry> next_waiting_host();

    void touch(clock::time_point now) { last_used_.store(now.time_since_epoch().count(), std::memory_order_relaxed); }
    clock::time_point last_used() const {
        return clock::time_point(clock::duration(last_used_.load(std::memory_order_relaxed)));
    }

private:
    std::mutex mutex_;
    std::deque<std::weak_ptr<host_entry>> waiting_hosts_;           ///< guarded by mutex_, in order
    /// The same, for look-up: by control block, which a weak_ptr keeps (an address could
    /// be a new entry's once the old one is gone).
    std::set<std::weak_ptr<host_entry>, std::owner_less<>> registered_;
    std::atomic<clock::rep> last_used_{0};
};

/// What one client looks like to the metrics and status views.
struct client_snapshot {
    std::string key;  ///< the client's name
    unsigned weight = 1;
    std::size_t waiting = 0;
    std::size_t in_flight = 0;
    std::array<std::uint64_t, outcome_count> outcomes{};
};

/// What a client has counted so far: the counters of its series.
struct client_counts {
    std::array<std::uint64_t, outcome_count> outcomes{};

    static client_counts of(const client_snapshot& c) { return {c.outcomes}; }
    client_counts& operator+=(const client_counts& o);
    void fill(client_snapshot& into) const { into.outcomes = outcomes; }
    bool operator==(const client_counts&) const = default;
};

/// Every client with state: created on a request's first use of its name, forgotten once
/// idle (nothing waiting, nothing in flight, no request holding it) for `idle_for`.
///
/// Bounds: a client's state lives while its requests do, and an idle one is forgotten,
/// so their number is bounded by the requests parked and in flight (limits.max_parked,
/// the hosts' limits) plus the names seen within one idle period, and by max_clients:
/// a new name beyond it first makes room by forgetting idle clients at once, else its
/// requests are anonymous's. Names come from credentials, addresses or a header the
/// allowed clients set: a client that sends a new header value per request makes a
/// client per request (each its own share): header identities are as trustworthy as the
/// clients allowed to send them (README).
///
/// Locking: one mutex around the map; accounts are thread-safe on their own.
class client_book {
public:
    /// A reload: weights and caps of known clients change at once; `off` (no clients:
    /// section) makes find() answer null from now on.
    void set_config(const std::optional<clients_config>& clients);
    /// The state of the client called `name` (empty: anonymous); null without clients:.
    std::shared_ptr<client_state> find(std::string_view name, clock::time_point now);

    /// Clients with state at once, at most (see Bounds).
    static constexpr std::size_t max_clients = 100000;

    using evicted_fn = std::function<void(const std::string& name, const client_counts& final)>;
    std::size_t evict_idle(clock::time_point now, clock::duration idle_for, const evicted_fn& on_evicted);
    std::vector<client_snapshot> snapshot() const;
    std::size_t size() const;

private:
    /// Forgets the clients `forget` picks among the idle ones (nothing waiting, nothing in
    /// flight, no request holding it); under mutex_.
    template <class Forget>
    std::size_t forget_idle_locked(Forget&& forget, const evicted_fn& on_evicted);

    mutable std::mutex mutex_;
    std::optional<clients_config> config_;
    /// Looked up by string_view: no string made for a name already known.
    std::unordered_map<std::string, std::shared_ptr<client_state>, keyed_string_hash, std::equal_to<>> clients_;
    evicted_fn last_evicted_;  ///< evict_idle's, for the room made by find()
};

}  // namespace politeproxy
