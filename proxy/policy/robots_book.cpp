#include "politeproxy/policy/robots_book.hpp"

#include <algorithm>
#include <iterator>
#include <vector>

namespace politeproxy {

void robots_book::configure(clock::duration cache_ttl, clock::duration max_delay) {
    cache_ttl_ = cache_ttl;
    max_delay_ = max_delay;
}

bool robots_book::on_request(const std::string& origin, clock::time_point now) {
    auto it = origins_.find(origin);
    if (it == origins_.end()) {
        make_room(now);
        it = origins_.emplace(origin, origin_state{}).first;
    } else if (it->second.fetching ? now - it->second.fetch_started < fetch_timeout : now < it->second.refetch_at) {
        return false;
    }
    it->second.fetching = true;
    it->second.fetch_started = now;
    return true;
}

void robots_book::fetched(const std::string& origin, const std::string& gate_key, std::optional<double> delay,
                          bool failed, clock::time_point now) {
    auto& state = origins_[origin];
    state.fetching = false;
    state.refetch_at = now + (failed ? std::min<clock::duration>(retry_after_failure, cache_ttl_) : cache_ttl_);
    if (failed) return;  // what an earlier read set stays until it expires
    auto cap = caps_.find(gate_key);
    if (!delay) {
        if (cap != caps_.end() && cap->second.origin == origin) caps_.erase(cap);  // no longer asked
        return;
    }
    const double seconds = std::min(*delay, std::chrono::duration<double>(max_delay_).count());
    const gate_cap fresh{1.0 / seconds, now + cache_ttl_, origin};
    if (cap == caps_.end())
        caps_.emplace(gate_key, fresh);
    else if (cap->second.origin == origin || cap->second.until <= now || fresh.rate < cap->second.rate)
        cap->second = fresh;
}

std::optional<double> robots_book::rate_cap(const std::string& gate_key, clock::time_point now) const {
    const auto it = caps_.find(gate_key);
    if (it == caps_.end() || it->second.until <= now) return std::nullopt;
    return it->second.rate;
}

void robots_book::make_room(clock::time_point now) {
    if (origins_.size() < max_origins) return;
    std::erase_if(origins_, [now](const auto& kv) { return !kv.second.fetching && kv.second.refetch_at <= now; });
    std::erase_if(caps_, [now](const auto& kv) { return kv.second.until <= now; });
    if (origins_.size() < max_origins) return;
    // Still full of fresh entries: forget the half read longest ago (they are fetched again).
    std::vector<std::pair<clock::time_point, const std::string*>> by_age;
    by_age.reserve(origins_.size());
    for (const auto& [key, state] : origins_)
        if (!state.fetching) by_age.emplace_back(state.refetch_at, &key);
    const auto half = by_age.begin() + static_cast<std::ptrdiff_t>(by_age.size() / 2);
    std::nth_element(by_age.begin(), half, by_age.end());
    std::vector<std::string> forget;
    for (auto it = by_age.begin(); it != half; ++it) forget.push_back(*it->second);
    for (const auto& key : forget) origins_.erase(key);
    std::erase_if(caps_, [this](const auto& kv) { return !origins_.contains(kv.second.origin); });
}

}  // namespace politeproxy
