#pragma once
// SipHash (Aumasson and Bernstein, 2012): a hash keyed by a secret, for tables whose
// keys come from outside. With an unkeyed hash (std::hash is MurmurHash with a fixed
// seed) names that share a table slot can be found offline, and every lookup among
// them walks all of them: hash flooding. Without the key nobody can tell which names
// share a slot.
#include <cstdint>
#include <string_view>

namespace politeproxy {

struct sip_key {
    std::uint64_t k0 = 0, k1 = 0;  ///< the key's 16 bytes, as two little-endian words
};

/// SipHash-c-d of `bytes` under `key`: c rounds per 8-byte word, d to finish. The
/// reference's SipHash-2-4 is sip_hash<2, 4>; keyed_hash takes SipHash-1-3.
template <int C, int D>
std::uint64_t sip_hash(const sip_key& key, std::string_view bytes) noexcept;

/// SipHash-1-3 (as Rust's HashMap) under a key drawn from the kernel's random source
/// once per process (getrandom): the same bytes hash alike within a process, unlike
/// from one process to the next.
std::uint64_t keyed_hash(std::string_view bytes) noexcept;

/// keyed_hash for std::unordered_map and set keyed by names from outside (hosts, domains,
/// origins, clients), whose buckets an unkeyed hash would let anyone fill in one:
/// `std::unordered_map<std::string, T, keyed_string_hash, std::equal_to<>>` (transparent:
/// found by a string_view without making a string).
struct keyed_string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return keyed_hash(s); }
};

}  // namespace politeproxy
