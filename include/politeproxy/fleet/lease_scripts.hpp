#pragma once
// The lease protocol's store half: Lua scripts that run inside Redis, one round trip
// each. Every time they use is the store's own (TIME), never a proxy's clock, so
// processes with skewed clocks agree on when a lease expires.
#include <string>
#include <string_view>

namespace politeproxy::fleet {

struct lua_script {
    std::string body;
    std::string sha1;  ///< for EVALSHA (hex)
};

/// KEYS: leases, state, waiters, polled. ARGV: lease member, lease ttl ms, limit, rate,
/// burst, state ttl ms, process tag, waiter stale ms.
/// Purges expired leases and stale waiters; then grants a lease when the host is not
/// paused, a slot is free for this process (processes that asked earlier and still ask
/// come first, one place each: a fleet-wide FIFO of the processes' queue heads) and the
/// fleet-wide token bucket (GCRA) has a token. The limit and rate are the shared ones
/// when a process published them, else the caller's.
/// Returns {granted 0|1, leases held, limit, rate in micro-tokens/s, pause ms, token wait ms}.
const lua_script& acquire_script();

/// KEYS: leases. ARGV: lease ttl ms, members... Extends each lease to now + ttl, and
/// re-asserts one that is gone. Returns {re-asserted (were lost), leases held}.
const lua_script& renew_script();

/// KEYS: state. ARGV: limit, rate, pause ms, state ttl ms. A process's decision for the
/// whole fleet: the limit and rate, and a pause (extended, never shortened).
const lua_script& publish_script();

/// KEYS: waiters, polled. ARGV: process tag. This process no longer waits for the host.
const lua_script& withdraw_script();

/// A release is a plain `ZREM leases member`: no script, the cheapest command there is.

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
