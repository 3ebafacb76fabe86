#pragma once
// The lease protocol's store half: Lua scripts that run inside Redis, one round trip
// each. Every time they use is the store's own (TIME), never a proxy's clock, so
// processes with skewed clocks agree on when a lease expires.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/fleet/redis_reply.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace politeproxy::fleet {

struct lua_script {
    std::string body;
    std::string sha1;  ///< for EVALSHA (hex)
};

/// KEYS: leases, state, waiters, polled, then one leases key per lease given back (any
/// host's: one store; this host's: a cluster, one slot). ARGV: lease ttl ms, limit, rate,
/// burst, state ttl ms, process tag, waiter stale ms, spare tokens wanted per lease
/// granted, bucket ms given back (this host's spare tokens not used), the members given
/// back (one per extra key), then the members wanted (one per request of one batch:
/// several of one host in one event-loop turn).
/// First gives the bucket back its unused tokens and removes the leases given back
/// (releases carried by an acquire: one command instead of two or more; see
/// release_script). Purges expired leases and stale waiters; then grants leases to the
/// first members wanted, as many as the host is not paused, slots are free for this
/// process (processes that asked earlier and still ask come first, one place each: a
/// fleet-wide FIFO of the processes' queue heads) and the fleet-wide token bucket (GCRA)
/// has tokens, one per lease. When no other process waits, it also takes up to the spare
/// tokens wanted per lease granted that the bucket has now: the process hands a lease on
/// to its next request of the host with one of them, without a round trip. The limit and
/// rate are the shared ones when a process published them, else the caller's.
/// Returns {leases granted, leases held, limit, rate in micro-tokens/s, pause ms, token
/// wait ms (refused: for the first; granted: for the next), spare tokens taken}.
const lua_script& acquire_script();

/// KEYS: a leases key per lease given back, then state keys. ARGV: how many leases, a
/// member per leases key, bucket ms per state key. Removes the leases (a run of one key's
/// in one ZREM) and gives the buckets back their unused spare tokens. Releases that found
/// no acquire to carry them, several hosts' in one command (a cluster: one host's).
const lua_script& release_script();

const lua_script& renew_script();

/// KEYS: state. ARGV: limit, rate, pause ms, state ttl ms. A process's decision for the
/// whole fleet: the limit and rate, and a pause (extended, never shortened).
const lua_script& publish_script();

/// KEYS: waiters, polled. ARGV: process tag. This process no longer waits for the host.
const lua_script& withdraw_script();

/// The store's answer to one acquire.
struct lease_answer {
    enum class result : std::uint8_t { granted, refused, store_down };
    result what = result::store_down;
    std::uint64_t lease = 0;            ///< granted: give it back with release()
    std::size_t granted = 0;            ///< the reply: leases its batch was granted
    std::size_t held = 0;               ///< leases held fleet-wide, this one included
    std::size_t limit = 0;              ///< the fleet's limit for the host
    double rate = 0;                    ///< the fleet's rate for the host
    clock::duration paused_for{};       ///< refused: the host is paused this much longer
    clock::duration token_in{};         ///< the fleet's next token is due then
    std::size_t spares = 0;             ///< the reply: spare tokens its batch took
};


/// The acquire script's reply read into an answer (`lease` left 0), or nothing when it
/// has not the script's shape. Figures are clamped to what the proxy can hold: a count
/// to [0, 1e9], the limit to at least 1, a negative rate to 0, waits to [0, 30 days].
std::optional<lease_answer> read_acquire_reply(const redis_reply& r);

/// The renew script's reply: leases re-asserted (they had gone) and leases held.
struct renew_answer {
    std::size_t lost = 0;
    std::size_t held = 0;
};
std::optional<renew_answer> read_renew_reply(const redis_reply& r);


/// A host's leases key (host_keys::leases without the other three).
std::string leases_key(std::string_view key);

/// One host key's keys in the store, hash-tagged `{key}` so every script touches one
/// Redis Cluster slot.
struct host_keys {
    explicit host_keys(std::string_view key);
    std::string leases;   ///< sorted set: lease member -> expiry (store ms)
    std::string state;    ///< hash: limit, rate, pause_until, tat (the bucket)
    std::string waiters;  ///< sorted set: process tag -> when its queue head first asked
    std::string polled;   ///< sorted set: process tag -> when it last asked
};

}  // namespace politeproxy::fleet
