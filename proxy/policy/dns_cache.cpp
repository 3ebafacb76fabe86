#include "politeproxy/policy/dns_cache.hpp"

#include <algorithm>

namespace politeproxy {

bool is_ipv4(const ip_bytes& a) {
    static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::equal(std::begin(mapped), std::end(mapped), a.begin());
}

std::vector<ip_bytes> interleave_families(std::span<const ip_bytes> v6, std::span<const ip_bytes> v4) {
    std::vector<ip_bytes> out;
    out.reserve(v6.size() + v4.size());
    for (std::size_t i = 0; i < std::max(v6.size(), v4.size()); ++i) {
        if (i < v6.size()) out.push_back(v6[i]);
        if (i < v4.size()) out.push_back(v4[i]);
    }
    return out;
}

dns_cache::hit dns_cache::state_of(const name_entry& e, clock::time_point now) const {
    hit h;
    h.expires = e.expires;
    if (e.addresses.empty()) {
        h.what = now < e.expires ? hit::kind::negative : hit::kind::miss;
        return h;
    }
    h.addresses = e.addresses;
    if (now < e.expires) h.what = hit::kind::fresh;
    else if (now >= e.expires + settings_.stale_for) h.what = hit::kind::miss;
    else if (now < e.recheck) h.what = hit::kind::stale;
    else h.what = hit::kind::expired;
    if (h.what == hit::kind::miss) h.addresses = {};
    return h;
}

dns_cache::hit dns_cache::find(std::string_view name, clock::time_point now) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) return {};
    entries_.splice(entries_.begin(), entries_, it->second);
    return state_of(*it->second, now);
}

dns_cache::hit dns_cache::peek(std::string_view name, clock::time_point now) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? hit{} : state_of(*it->second, now);
}

dns_cache::lru::iterator dns_cache::slot_for(std::string_view name) {
    if (const auto it = by_name_.find(name); it != by_name_.end()) {
        entries_.splice(entries_.begin(), entries_, it->second);
        return it->second;
    }
    if (by_name_.size() >= settings_.max_names && !entries_.empty()) {
        by_name_.erase(entries_.back().name);
        entries_.pop_back();
    }
    entries_.push_front(name_entry{std::string(name), {}, {}, {}});
    by_name_.emplace(entries_.front().name, entries_.begin());
    return entries_.begin();
}

dns_cache::hit dns_cache::store(std::string_view name, const dns_answer& answer, clock::time_point now) {
    auto what = answer.what;
    if (what == dns_answer::outcome::found && answer.v6.empty() && answer.v4.empty()) what = dns_answer::outcome::no_such_name;
    switch (what) {
        case dns_answer::outcome::found: {
            const auto e = slot_for(name);
            e->addresses = interleave_families(answer.v6, answer.v4);
            e->expires = now + std::clamp(answer.ttl, settings_.min_ttl, settings_.max_ttl);
            e->recheck = {};
            auto h = state_of(*e, now);
            h.what = hit::kind::fresh;  // for the requests that waited for it, even with a TTL of 0
            return h;
        }
        case dns_answer::outcome::no_such_name: {
            const auto ttl = std::min(answer.ttl, settings_.negative_ttl);
            if (ttl <= clock::duration::zero()) {
                // Not kept: forget what was there (the name is gone).
                if (const auto it = by_name_.find(name); it != by_name_.end()) {
                    const auto entry = it->second;
                    by_name_.erase(it);  // first: its key is a view of the entry's name
                    entries_.erase(entry);
                }
                hit h;
                h.what = hit::kind::negative;
                h.expires = now;
                return h;
            }
            const auto e = slot_for(name);
            e->addresses.clear();
            e->expires = now + ttl;
            e->recheck = {};
            return state_of(*e, now);
        }
        case dns_answer::outcome::failed:
            break;
    }
    const auto it = by_name_.find(name);
    if (it == by_name_.end() || it->second->addresses.empty()) return {};
    name_entry& e = *it->second;
    if (now >= e.expires + settings_.stale_for) return {};
    if (now < e.expires) return state_of(e, now);  // a refresh before its time failed: still fresh
    e.recheck = now + stale_recheck;
    return state_of(e, now);
}

}  // namespace politeproxy
