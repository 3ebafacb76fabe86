#include "politeproxy/policy/parent_route.hpp"

#include "politeproxy/policy/host_key.hpp"

#include <algorithm>
#include <cmath>

namespace politeproxy {

bool parent_route::matches_name(std::string_view key) const {
    return std::any_of(names.begin(), names.end(), [&](const std::string& p) { return host_matches(p, key); });
}

bool parent_route::matches_address(const ip_bytes& address) const { return any_contains(networks, address); }

const parent_route* route_for(std::span<const parent_route> routes, std::string_view key,
                              std::span<const ip_bytes> addresses) {
    for (const parent_route& r : routes) {
        if (r.matches_name(key)) return &r;
        for (const ip_bytes& a : addresses)
            if (r.matches_address(a)) return &r;
    }
    return nullptr;
}

bool route_needs_addresses(std::span<const parent_route> routes, std::string_view key) {
    for (const parent_route& r : routes) {
        if (!r.networks.empty()) return true;
        if (r.matches_name(key)) return false;
    }
    return false;
}

namespace {

// 64-bit FNV-1a, then a finalizer (splitmix64) so nearby inputs spread over the range.
std::uint64_t mix(std::string_view a, std::string_view b) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::string_view part : {a, std::string_view("\0", 1), b})
        for (unsigned char c : part) h = (h ^ c) * 1099511628211ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

}  // namespace

std::optional<std::size_t> pick_way(parent_route::pick_kind pick, std::span<const way_state> ways,
                                    std::string_view key, std::uint64_t turn) {
    std::optional<std::size_t> best;
    switch (pick) {
    case parent_route::pick_kind::round_robin: {
        // Smooth enough for proxy pools: the turn walks the weighted ring, and a way that
        // is not usable passes its turn to the next usable one.
        std::size_t total = 0;
        for (const way_state& w : ways) total += w.weight;
        if (total == 0) return std::nullopt;
        std::size_t at = static_cast<std::size_t>(turn % total);
        std::size_t first = 0;
        for (std::size_t i = 0; i < ways.size(); ++i) {
            if (at < ways[i].weight) {
                first = i;
                break;
            }
            at -= ways[i].weight;
        }
        for (std::size_t k = 0; k < ways.size(); ++k) {
            const std::size_t i = (first + k) % ways.size();
            if (ways[i].usable) return i;
        }
        return std::nullopt;
    }
    case parent_route::pick_kind::least_busy: {
        // busy/weight compared without division; ties go to the earlier way.
        for (std::size_t i = 0; i < ways.size(); ++i) {
            if (!ways[i].usable) continue;
            if (!best || ways[i].busy * ways[*best].weight < ways[*best].busy * ways[i].weight) best = i;
        }
        return best;
    }
    case parent_route::pick_kind::by_host: {
        // Weighted rendezvous hashing: each host key ranks the ways by -weight/ln(u),
        // u its hash with the way's name in (0,1); it keeps its way while that way is
        // usable, and only the hosts of a way that goes down move.
        double best_score = 0;
        for (std::size_t i = 0; i < ways.size(); ++i) {
            if (!ways[i].usable) continue;
            const double u = (static_cast<double>(mix(key, ways[i].name) >> 11) + 0.5) / 9007199254740992.0;
            const double score = -static_cast<double>(ways[i].weight) / std::log(u);
            if (!best || score > best_score) {
                best = i;
                best_score = score;
            }
        }
        return best;
    }
    }
    return best;
}

}  // namespace politeproxy
