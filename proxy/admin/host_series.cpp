#include "politeproxy/admin/host_series.hpp"

#include <algorithm>
#include <numeric>

namespace politeproxy {

namespace {

std::uint64_t requests(const host_snapshot& h) { return std::accumulate(h.outcomes.begin(), h.outcomes.end(), std::uint64_t{0}); }

}  // namespace

host_series::picked host_series::pick(const std::vector<host_snapshot>& hosts, std::size_t cap) {
    std::lock_guard lock(mutex_);
    picked out;
    out.named.assign(hosts.size(), false);
    out.other.key = "_other";

    // Named hosts that are gone were evicted (evicted() already forgot them): their
    // series end. Hosts evicted since begin_scrape() are left out even when the snapshot
    // still has them (it was taken first): evicted() already counted them.
    std::unordered_set<std::string> still_named;
    std::vector<std::size_t> unnamed;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        if (evicted_in_scrape_.contains(hosts[i].key)) continue;
        if (named_.contains(hosts[i].key) && still_named.size() < cap) {
            still_named.insert(hosts[i].key);
            out.named[i] = true;
        } else {
            unnamed.push_back(i);
        }
    }
    named_ = std::move(still_named);
    evicted_in_scrape_.clear();
    scraping_ = false;

    // Free places to the busiest of the rest.
    if (named_.size() < cap && !unnamed.empty()) {
        const std::size_t free = std::min(cap - named_.size(), unnamed.size());
        auto busier = [&](std::size_t a, std::size_t b) {
            const host_snapshot& x = hosts[a];
            const host_snapshot& y = hosts[b];
            if (requests(x) != requests(y)) return requests(x) > requests(y);
            if (x.in_flight + x.waiting != y.in_flight + y.waiting) return x.in_flight + x.waiting > y.in_flight + y.waiting;
            return x.key < y.key;
        };
        std::partial_sort(unnamed.begin(), unnamed.begin() + static_cast<std::ptrdiff_t>(free), unnamed.end(), busier);
        for (std::size_t n = 0; n < free; ++n) {
            const host_snapshot& h = hosts[unnamed[n]];
            out.named[unnamed[n]] = true;
            named_.insert(h.key);
            // Counted in "_other" at the last scrape: the count stays there.
            if (in_other_.erase(h.key) > 0) carried_ += host_counts::of(h);
        }
        unnamed.erase(unnamed.begin(), unnamed.begin() + static_cast<std::ptrdiff_t>(free));
    }

    host_counts sums = carried_;
    std::unordered_set<std::string> in_other;
    in_other.reserve(unnamed.size());
    for (const std::size_t i : unnamed) {
        const host_snapshot& h = hosts[i];
        out.other.in_flight += h.in_flight;
        out.other.waiting += h.waiting;
        sums += host_counts::of(h);
        in_other.insert(h.key);
    }
    in_other_ = std::move(in_other);
    out.other.outcomes = sums.outcomes;
    out.other.limit_changes = sums.limit_changes;
    out.other.would_have_waited = sums.would_have_waited;
    out.has_other = !unnamed.empty() || !(carried_ == host_counts{});
    return out;
}

void host_series::begin_scrape() {
    std::lock_guard lock(mutex_);
    scraping_ = true;
    evicted_in_scrape_.clear();
}

void host_series::evicted(const std::string& key, const host_counts& final) {
    std::lock_guard lock(mutex_);
    if (scraping_) evicted_in_scrape_.insert(key);
    if (named_.erase(key) > 0) return;  // its series ends with it
    in_other_.erase(key);
    carried_ += final;  // unnamed (last scrape or since): its count stays in "_other"
}

}  // namespace politeproxy
