// host_gates: robots.txt turns and their holds (the fetch first, the gate held meanwhile, the Crawl-delay applied), and verdicts.
#include "host_gates_parts.hpp"

namespace politeproxy {
using namespace gates_detail;

robots_turn host_gates::robots_due(const std::string& origin, const std::string& key,
                                const std::string& address) {
    const auto where = table_.locate(key);
    std::lock_guard lock(where.s.mutex);
    const auto now = time_.now();
    {
        std::lock_guard robots_lock(robots_mutex_);
        if (!robots_.on_request(origin, now)) return {};
    }
    robots_turn turn;
    turn.gates_ = this;
    turn.origin_ = origin;
    turn.key_ = key;
    if (fleet_) return turn;
    turn.slot = depart_at_once_locked(where, address, now, nullptr, nullptr);  // nobody's: no cap to meet
    if (turn.slot) {
        turn.held_ = true;
        turn.slot.entry_->robots_hold = true;
        apply_health(*turn.slot.entry_, now);
    }
    return turn;
}

robots_turn::robots_turn(robots_turn&& other) noexcept
    : slot(std::move(other.slot)),
      read(std::move(other.read)),
      gates_(std::exchange(other.gates_, nullptr)),
      origin_(std::move(other.origin_)),
      key_(std::move(other.key_)),
      held_(other.held_) {}

robots_turn::~robots_turn() {
    if (gates_) gates_->robots_done(origin_, key_, read, held_);
}

void host_gates::robots_done(const std::string& origin, const std::string& key, const robots_read& read, bool held) {
    const auto now = time_.now();
    const auto cfg = current_config();
    const backoff_config& backoff = cfg->policy_for(key, utc_today()).backoff;
    std::optional<double> cap;
    {
        std::lock_guard lock(robots_mutex_);
        robots_.fetched(origin, key, read, {backoff.initial, backoff.max}, now);
        cap = robots_.rate_cap(key, now);
    }
    const auto where = table_.locate(key);
    wakeups wake;
    std::lock_guard lock(where.s.mutex);
    const auto found = table_.find(where);
    if (!found) return;
    host_entry& e = *found;
    if (held) e.robots_hold = false;  // only the fetch that set the hold lifts it
    e.robots_rate = cfg->robots.honor ? cap : std::nullopt;  // disallow: enforce alone leaves the rate alone
    apply_health(e, now);
    wake.run_gate(e, now);
}

robots_verdict host_gates::robots_verdict_for(const std::string& origin) {
    std::lock_guard lock(robots_mutex_);
    return robots_.verdict(origin, time_.now());
}

}  // namespace politeproxy
