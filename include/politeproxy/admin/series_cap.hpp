#pragma once
// Which hosts (and clients) get Prometheus series of their own under
// metrics.max_host_series (max_client_series), scrape after scrape (sans-io: no registry,
// no clock).
#include "politeproxy/base/keyed_hash.hpp"
#include "politeproxy/exchange/client_book.hpp"
#include "politeproxy/exchange/host_table.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_set>
#include <vector>

namespace politeproxy {

/// Caps the series of one kind of thing (a `Snapshot` with key, in_flight, waiting and
/// outcomes; its `Counts`, the counters of its series): at most `cap` are named, the rest
/// are summed under "_other".
///
/// Algorithm. A key that got a series keeps it for as long as it has state: names never
/// flap between a key and "_other" from one scrape to the next, so a named key's counters
/// are its own. Free places (a named key was evicted, or there were never `cap` keys) go
/// to the keys with the most requests so far, then the most in flight and waiting. The
/// counters of "_other" never go back, or a rate() over them would read a reset: what
/// leaves "_other" stays counted in it: a key promoted to a series of its own leaves its
/// count there, and so does a key evicted while unnamed (evicted()).
///
/// A scrape is begin_scrape(), the snapshot (host_series_row for hosts: read in slices,
/// over time), then pick(): a key may be evicted after its row was read and before the
/// pick: it is in the snapshot, and evicted() has already dealt with it (counted it in
/// "_other", or ended its series). pick() leaves every key evicted since begin_scrape()
/// out of that scrape (one created again under the same key meanwhile is counted from
/// the next scrape). Evictions outside a scrape are not remembered by key, so memory
/// stays bounded by the keys with state.
///
/// Locking. One mutex; pick() and evicted() may come from different threads. Never call
/// pick() while holding a gate's lock (evicted() is called under one).
template <class Snapshot, class Counts>
class series_cap {
public:
    struct picked {
        std::vector<bool> named;  ///< per key of the snapshot: a series of its own
        bool has_other = false;   ///< "_other" has anything to say (unnamed keys, or counts carried)
        Snapshot other;           ///< key "_other": the sums (gauges of unnamed keys, counters carried too)
    };

    /// Before the snapshot of a scrape.
    void begin_scrape() {
        std::lock_guard lock(mutex_);
        scraping_ = true;
        evicted_in_scrape_.clear();
    }

    /// One scrape: `all` is the snapshot, `cap` the series cap.
    picked pick(const std::vector<Snapshot>& all, std::size_t cap) {
        std::lock_guard lock(mutex_);
        picked out;
        out.named.assign(all.size(), false);
        out.other.key = "_other";

        // Named keys that are gone were evicted (evicted() already forgot them): their
        // series end. Keys evicted since begin_scrape() are left out even when the
        // snapshot still has them (it was taken first): evicted() already counted them.
        std::unordered_set<std::string> still_named;
        std::vector<std::size_t> unnamed;
        for (std::size_t i = 0; i < all.size(); ++i) {
            if (evicted_in_scrape_.contains(all[i].key)) continue;
            if (named_.contains(all[i].key) && still_named.size() < cap) {
                still_named.insert(all[i].key);
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
                const Snapshot& x = all[a];
                const Snapshot& y = all[b];
                if (requests(x) != requests(y)) return requests(x) > requests(y);
                if (x.in_flight + x.waiting != y.in_flight + y.waiting) return x.in_flight + x.waiting > y.in_flight + y.waiting;
                return x.key < y.key;
            };
            std::partial_sort(unnamed.begin(), unnamed.begin() + static_cast<std::ptrdiff_t>(free), unnamed.end(), busier);
            for (std::size_t n = 0; n < free; ++n) {
                const Snapshot& h = all[unnamed[n]];
                out.named[unnamed[n]] = true;
                named_.insert(h.key);
                // Counted in "_other" at the last scrape: the count stays there.
                if (in_other_.erase(keyed_hash(h.key)) > 0) carried_ += Counts::of(h);
            }
            unnamed.erase(unnamed.begin(), unnamed.begin() + static_cast<std::ptrdiff_t>(free));
        }

        Counts sums = carried_;
        std::unordered_set<std::uint64_t> in_other;
        in_other.reserve(unnamed.size());
        for (const std::size_t i : unnamed) {
            const Snapshot& h = all[i];
            out.other.in_flight += h.in_flight;
            out.other.waiting += h.waiting;
            sums += Counts::of(h);
            in_other.insert(keyed_hash(h.key));
        }
        in_other_ = std::move(in_other);
        sums.fill(out.other);
        out.has_other = !unnamed.empty() || !(carried_ == Counts{});
        return out;
    }

    /// A key's state was forgotten, with these final counts.
    void evicted(const std::string& key, const Counts& final) {
        std::lock_guard lock(mutex_);
        if (scraping_) evicted_in_scrape_.insert(key);
        if (named_.erase(key) > 0) return;  // its series ends with it
        in_other_.erase(keyed_hash(key));
        carried_ += final;  // unnamed (last scrape or since): its count stays in "_other"
    }

private:
    static std::uint64_t requests(const Snapshot& h) {
        return std::accumulate(h.outcomes.begin(), h.outcomes.end(), std::uint64_t{0});
    }

    std::mutex mutex_;
    std::unordered_set<std::string> named_;
    /// The unnamed keys of the last scrape, by keyed_hash: a million hosts' names would
    /// take ~100 MB kept from one scrape to the next; their 64-bit hashes take ~24 MB.
    /// Two names of a million share one with odds of 1 in 3e7: then a promotion may
    /// carry a count twice, or (both promoted at once) drop one from "_other".
    std::unordered_set<std::uint64_t> in_other_;
    Counts carried_;                            ///< counts of keys that left "_other"
    bool scraping_ = false;                     ///< between begin_scrape() and pick()
    std::unordered_set<std::string> evicted_in_scrape_;
};

/// Per-host series under metrics.max_host_series (host="_other").
using host_series = series_cap<host_series_row, host_counts>;
/// Per-client series under metrics.max_client_series (client="_other").
using client_series = series_cap<client_snapshot, client_counts>;

}  // namespace politeproxy
