#pragma once
// The admin API's per-host overrides of this process (policy/live_override): what each
// host key has now, applied to its gate (host_gates::set_live_override), kept across
// restarts (admin.state_file), shared with the fleet (its store, through
// fleet/override_sync), and logged one line per change.
#include "politeproxy/fleet/override_sync.hpp"
#include "politeproxy/policy/live_override.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

class host_gates;
class logger;

/// A change is written to the state file (a new file renamed over the old one: a crash
/// leaves the old or the new, never half of one) at once, or with the next tick when the
/// last write is less than `save_spacing` old (10 000 puts in a row write the file tens
/// of times, not 10 000), by `write_off` (the config loader's thread: a write and its
/// fsync never hold up a worker); flush() writes what is left at shutdown, here. The file
/// is read at start; with a fleet too, so a process that starts while the store is away
/// still holds what it held (the store's word wins when it answers). With a fleet, a change goes to the store and comes back from it to every
/// process (this one too: applying the same override twice changes nothing); the store
/// keeps each override for its lifetime (its TTL), and after the store lost them (a
/// restart) every process puts back what it knows. An override expires by itself
/// everywhere: each process drops it at `expires_at` (tick), as the store does.
///
/// Thread safety: every call from any thread (one mutex, taken before any lock of the
/// gates: they hear the changes in the order they were made).
class live_overrides {
public:
    /// `write_off(job)` runs a state file write elsewhere, in the order given (null: here).
    live_overrides(host_gates& gates, const logger& log, std::string state_file,
                   std::function<void(std::function<void()>)> write_off = {})
        : gates_(gates), log_(log), state_file_(std::move(state_file)), write_off_(std::move(write_off)) {}

    /// At start: the overrides of the state file, if it names one. A file that is
    /// not a whole state file (torn mid-write, edited by hand) is refused, logged, and the
    /// proxy starts without it. Expired entries are dropped.
    void load_state(wall_clock::time_point now);
    /// With a fleet: changes go through `sync`, before it starts.
    void share_through(fleet::override_sync& sync) { sync_ = &sync; }

    /// The API put `o` (o.key, o.set_by set): applied here at once, then kept or shared.
    void put(live_override o);
    /// The API deleted `key`'s override (`by`: the token's name). With a fleet the store
    /// is told also when this process has none (another may have it, not yet heard here).
    enum class removal { removed, none, sent_to_fleet };
    removal remove(const std::string& key, std::string_view by);
    /// The store's word on `key`: `value` (an override's JSON) or none.
    void heard(const std::string& key, const std::optional<std::string>& value, wall_clock::time_point now);
    /// About once a second: expired overrides go; a change not yet written is.
    void tick(wall_clock::time_point now);
    /// Shutdown: a change not yet written is.
    void flush();

    static constexpr auto save_spacing = std::chrono::milliseconds(200);

    /// The unexpired overrides, by key (one that expired goes from here at once, from the
    /// gates with the next tick).
    std::vector<std::shared_ptr<const live_override>> list() const;
    std::shared_ptr<const live_override> find(const std::string& key) const;
    /// What this process holds, for the store after it lost it.
    std::vector<fleet::override_sync::entry> known(wall_clock::time_point now) const;

private:
    /// Under mutex_: `key`'s override becomes `next` (null: none); the line logged says
    /// who did it and what changed. Returns whether anything changed.
    bool replace_locked(const std::string& key, std::shared_ptr<const live_override> next, std::string_view who);
    /// Writes the state file now (`at_once`, or save_spacing after the last write), else
    /// marks it to be written with the next tick; through write_off_ unless `here`.
    void save_locked(bool at_once, bool here = false);

    host_gates& gates_;
    const logger& log_;
    const std::string state_file_;
    const std::function<void(std::function<void()>)> write_off_;
    /// The writes, in order: one made here at shutdown may overtake one still queued.
    struct writes {
        std::mutex mutex;
        std::uint64_t done = 0;  ///< the newest written
    };
    const std::shared_ptr<writes> writes_ = std::make_shared<writes>();
    std::uint64_t saves_ = 0;
    fleet::override_sync* sync_ = nullptr;
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<const live_override>> by_key_;
    bool unsaved_ = false;
    std::chrono::steady_clock::time_point saved_at_{};
};

}  // namespace politeproxy
