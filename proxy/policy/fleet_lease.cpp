#include "politeproxy/policy/fleet_lease.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace politeproxy {

std::size_t fleet_share::limit(std::size_t limit, std::size_t workers) {
    return std::max<std::size_t>(1, limit / std::max<std::size_t>(1, workers));
}

double fleet_share::rate(double rate, std::size_t workers) { return rate / static_cast<double>(std::max<std::size_t>(1, workers)); }

std::size_t fleet_share::limit_during_hold(std::size_t limit, std::size_t workers, std::size_t others) {
    return std::min(fleet_share::limit(limit, workers), limit > others ? limit - others : 0);
}

lease_book::lease_book(std::uint64_t process_tag) {
    char text[20];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(process_tag));
    tag_ = text;
}

std::string lease_book::member(id lease) const { return tag_ + ":" + std::to_string(lease); }

void lease_book::add(id lease, std::string_view key, clock::time_point now) {
    leases_.insert_or_assign(lease, held{std::string(key), now});
}

bool lease_book::remove(id lease) { return leases_.erase(lease) > 0; }

namespace {

std::vector<lease_book::batch> grouped(std::map<std::string_view, std::vector<lease_book::id>>& by_key) {
    std::vector<lease_book::batch> out;
    out.reserve(by_key.size());
    for (auto& [key, ids] : by_key)
        for (std::size_t from = 0; from < ids.size(); from += lease_book::most_per_batch) {
            const auto to = std::min(ids.size(), from + lease_book::most_per_batch);
            out.emplace_back(std::string(key), std::vector<lease_book::id>(ids.begin() + from, ids.begin() + to));
        }
    return out;
}

}  // namespace

std::vector<lease_book::batch> lease_book::due(clock::time_point now, clock::duration every) {
    std::map<std::string_view, std::vector<id>> by_key;
    for (auto& [lease, h] : leases_)
        if (now - h.renewed >= every) {
            h.renewed = now;
            by_key[h.key].push_back(lease);
        }
    return grouped(by_key);
}

std::vector<lease_book::batch> lease_book::take_all(clock::time_point now) {
    std::map<std::string_view, std::vector<id>> by_key;
    for (auto& [lease, h] : leases_) {
        h.renewed = now;
        by_key[h.key].push_back(lease);
    }
    return grouped(by_key);
}

}  // namespace politeproxy
