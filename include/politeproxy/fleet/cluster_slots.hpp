#pragma once
// Redis Cluster's key space, sans-io: the slot a key hashes to, the slot map a node
// answers CLUSTER SLOTS with, and the redirections (MOVED, ASK) and transient refusals
// (TRYAGAIN, CLUSTERDOWN) a node answers a command with. cluster_store does the I/O.
#include "politeproxy/fleet/redis_reply.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy::fleet {

inline constexpr std::size_t cluster_slots = 16384;

/// A node as the cluster names it.
struct node_address {
    std::string host;
    std::uint16_t port = 0;
    bool operator==(const node_address&) const = default;
};

/// The slot of `key` (CRC16-XMODEM mod 16384 of its hash tag: the text between the first
/// `{` and the next `}` when that is not empty, else the whole key), as Redis computes it.
std::uint16_t key_slot(std::string_view key);
/// The slot of a key tagged `{tag}` (`tag` without braces): key_slot("pp:{" + tag + "}:x")
/// without building the key.
std::uint16_t tag_slot(std::string_view tag);

/// One range of CLUSTER SLOTS: slots first..last served by `master`.
struct slot_range {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    node_address master;
};

/// CLUSTER SLOTS' reply read into ranges, or nothing when it has not that shape (a slot
/// out of range, first > last, a port outside 1..65535, ranges covering more than every
/// slot: a hostile map of 16384 overlapping full ranges would cost 2.7e8 writes). A master named "" or "?"
/// (Redis 7: its address is unknown) is the node that answered, `asked`.
std::optional<std::vector<slot_range>> read_cluster_slots(const redis_reply& r, const node_address& asked);

/// A node's redirection of a command: `MOVED slot host:port` (the slot lives there now)
/// or `ASK slot host:port` (this command only, after ASKING).
struct redirection {
    bool moved = false;  ///< else ASK
    std::uint16_t slot = 0;
    node_address to;
};
/// The redirection an error reply carries, or nothing. An empty host is `asked`'s.
std::optional<redirection> read_redirection(std::string_view error, const node_address& asked);

/// TRYAGAIN (a multi-key command on a slot being migrated) or CLUSTERDOWN (the cluster
/// or this slot is not served): ask again later, not a store outage.
bool is_try_again(std::string_view error);
bool is_cluster_down(std::string_view error);

}  // namespace politeproxy::fleet
