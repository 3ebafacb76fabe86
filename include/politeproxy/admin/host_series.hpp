#pragma once
// Which hosts get Prometheus series of their own under metrics.max_host_series, scrape
// after scrape (sans-io: no registry, no clock).
#include "politeproxy/exchange/host_gates.hpp"

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace politeproxy {

/// Caps the per-host series: at most `cap` hosts are named, the rest are summed under
/// host="_other".
///
/// Algorithm. A host that got a series keeps it for as long as it has state: names never
/// flap between a host and "_other" from one scrape to the next, so a named host's
/// counters are that host's. Free places (a named host was evicted, or there were never
/// `cap` hosts) go to the hosts with the most requests so far, then the most in flight and
/// waiting. The counters of "_other" never go back, or a rate() over them would read a
/// reset: what leaves "_other" stays counted in it: a host promoted to a series of its
/// own leaves its count there, and so does a host evicted while unnamed (evicted()).
///
/// A scrape is begin_scrape(), the gates' snapshot, then pick(): a host may be evicted
/// between the snapshot and the pick: it is in the snapshot, and evicted() has already
/// dealt with it (counted it in "_other", or ended its series). pick() leaves every host
/// evicted since begin_scrape() out of that scrape (one created again under the same key
/// meanwhile is counted from the next scrape). Evictions outside a scrape are not
/// remembered by key, so memory stays bounded by the hosts with state.
///
/// Locking. One mutex; pick() and evicted() may come from different threads. Never call
/// pick() while holding a gate's lock (evicted() is called under one).
class host_series {
public:
    struct picked {
        std::vector<bool> named;  ///< per host of the snapshot: a series of its own
        bool has_other = false;   ///< "_other" has anything to say (unnamed hosts, or counts carried)
        host_snapshot other;      ///< key "_other": the sums (gauges of unnamed hosts, counters carried too)
    };

    /// Before the gates' snapshot of a scrape.
    void begin_scrape();
    /// One scrape: `hosts` is the gates' snapshot, `cap` metrics.max_host_series.
    picked pick(const std::vector<host_snapshot>& hosts, std::size_t cap);
    /// A host's gate was evicted, with these final counts.
    void evicted(const std::string& key, const host_counts& final);

private:
    std::mutex mutex_;
    std::unordered_set<std::string> named_;
    std::unordered_set<std::string> in_other_;  ///< the unnamed hosts of the last scrape
    host_counts carried_;                       ///< counts of hosts that left "_other"
    bool scraping_ = false;                       ///< between begin_scrape() and pick()
    std::unordered_set<std::string> evicted_in_scrape_;
};

}  // namespace politeproxy
