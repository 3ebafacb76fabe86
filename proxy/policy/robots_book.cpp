#include "politeproxy/policy/robots_book.hpp"

#include <algorithm>
#include <iterator>
#include <vector>

namespace politeproxy {

namespace {

// No robots.txt (a 4xx): every origin that has none shares this one.
const std::shared_ptr<const robots_rules>& no_restrictions() {
    static const auto none = std::make_shared<const robots_rules>();
    return none;
}

// The wait before fetching again after `failures` unreachable fetches in a row.
clock::duration backoff_after(unsigned failures, robots_book::backoff retry) {
    clock::duration wait = std::max<clock::duration>(retry.initial, std::chrono::seconds(1));
    for (unsigned i = 1; i < failures && wait < retry.max; ++i) wait *= 2;
    return std::min(wait, std::max(retry.max, retry.initial));
}

}  // namespace

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

void robots_book::fetched(const std::string& origin, const std::string& gate_key, const robots_read& read,
                          backoff retry, clock::time_point now) {
    auto& state = origins_[origin];  // made again if it was forgotten meanwhile
    state.fetching = false;
    if (read.what == robots_read::kind::not_read) return;  // nothing learnt: the next request fetches
    if (read.what == robots_read::kind::unreachable) {
        ++state.failures;
        state.refetch_at = now + backoff_after(state.failures, retry);
        if (state.serves_until <= now) keep(state, nullptr, {});  // no copy to fall back on
        return;  // a rate cap an earlier read set stays until it expires
    }
    state.failures = 0;
    state.refetch_at = now + cache_ttl_;
    const auto& rules = read.what == robots_read::kind::rules && read.rules ? read.rules : no_restrictions();
    keep(state, rules, state.refetch_at + cache_ttl_);
    update_cap(origin, gate_key, read.delay, now);
    if (rule_bytes_ > max_rule_bytes) make_room(now);
}

robots_verdict robots_book::verdict(const std::string& origin, clock::time_point now) const {
    using kind = robots_verdict::kind;
    const auto it = origins_.find(origin);
    if (it == origins_.end()) return {kind::unknown};
    const origin_state& state = it->second;
    if (state.rules && now < state.serves_until) return {kind::read, state.rules};  // also while a fresher copy is fetched
    if (state.fetching || state.failures == 0) return {kind::unknown};
    return {kind::unreachable, nullptr, std::max<clock::duration>(state.refetch_at - now, std::chrono::seconds(1))};
}

std::optional<double> robots_book::rate_cap(const std::string& gate_key, clock::time_point now) const {
    const auto it = caps_.find(gate_key);
    if (it == caps_.end() || it->second.until <= now) return std::nullopt;
    return it->second.rate;
}

void robots_book::update_cap(const std::string& origin, const std::string& gate_key, std::optional<double> delay,
                             clock::time_point now) {
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

void robots_book::keep(origin_state& state, std::shared_ptr<const robots_rules> rules, clock::time_point until) {
    if (state.rules) rule_bytes_ -= state.rules->bytes();
    state.rules = std::move(rules);
    state.serves_until = until;
    if (state.rules) rule_bytes_ += state.rules->bytes();
}

void robots_book::forget(origin_map::iterator it) {
    if (it->second.rules) rule_bytes_ -= it->second.rules->bytes();
    origins_.erase(it);
}

void robots_book::make_room(clock::time_point now) {
    const auto full = [this] { return origins_.size() >= max_origins || rule_bytes_ > max_rule_bytes; };
    if (!full()) return;
    for (auto it = origins_.begin(); it != origins_.end();) {
        const origin_state& s = it->second;
        const bool expired = !s.fetching && s.refetch_at <= now && s.serves_until <= now;
        if (expired) forget(it++);
        else ++it;
    }
    std::erase_if(caps_, [now](const auto& kv) { return kv.second.until <= now; });
    if (full()) {
        // Still full of fresh entries: forget the half read longest ago (they are fetched again).
        std::vector<std::pair<clock::time_point, const std::string*>> by_age;
        by_age.reserve(origins_.size());
        for (const auto& [key, state] : origins_)
            if (!state.fetching) by_age.emplace_back(state.refetch_at, &key);
        const auto half = by_age.begin() + static_cast<std::ptrdiff_t>(by_age.size() / 2);
        std::nth_element(by_age.begin(), half, by_age.end());
        std::vector<std::string> doomed;
        for (auto it = by_age.begin(); it != half; ++it) doomed.push_back(*it->second);
        for (const auto& key : doomed) forget(origins_.find(key));
    }
    std::erase_if(caps_, [this](const auto& kv) { return !origins_.contains(kv.second.origin); });
}

}  // namespace politeproxy
