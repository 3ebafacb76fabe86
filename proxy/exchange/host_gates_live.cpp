// host_gates: live overrides (the admin API's, exchange/live_overrides) and policy changes: a host's policy
// and pause with its override on top, at once for a tracked host, from creation for one
// tracked later, through reloads.
#include "host_gates_parts.hpp"

namespace politeproxy {
using namespace gates_detail;

std::shared_ptr<const host_policy> host_gates::policy_with(const std::shared_ptr<const config>& cfg,
                                                           const host_override* o, const live_override* live) {
    const host_policy& registry = o ? o->policy : cfg->defaults;
    if (!live) return {cfg, &registry};
    // The entry's override_entry points into cfg: the overridden policy keeps it alive too.
    struct overridden {
        std::shared_ptr<const config> cfg;
        host_policy policy;
    };
    auto held = std::make_shared<const overridden>(overridden{cfg, with_override(registry, *live)});
    return {held, &held->policy};
}

void host_gates::replace_policy_locked(host_entry& e, std::shared_ptr<const host_policy> policy, clock::time_point now) {
    // The health controller reads the old policy while it takes the new one: kept until then.
    const auto previous = std::exchange(e.policy, std::move(policy));
    const auto limit = e.health.limit();
    const auto rate = e.health.rate();
    e.health.reconfigure(*e.policy, now);
    if (e.health.limit() != limit || e.health.rate() != rate) publish_locked(e, now);
}

std::shared_ptr<const live_override> host_gates::live_for(const std::string& key) const {
    std::lock_guard lock(live_mutex_);
    const auto it = live_.find(key);
    return it == live_.end() ? nullptr : it->second;
}

void host_gates::take_live_locked(host_entry& e, std::shared_ptr<const live_override> live, clock::time_point now) {
    e.api_override = std::move(live);
    e.api_pause_until = {};
    if (e.api_override && e.api_override->pause_until) {
        const auto left = *e.api_override->pause_until - std::chrono::system_clock::now();
        if (left > std::chrono::system_clock::duration::zero())
            e.api_pause_until = now + std::chrono::duration_cast<clock::duration>(left);
    }
}

void host_gates::set_live_override(const std::string& key, std::shared_ptr<const live_override> live) {
    {
        std::lock_guard lock(live_mutex_);
        if (live) live_[key] = live;
        else live_.erase(key);
    }
    const auto cfg = current_config();
    const auto where = table_.locate(key);
    wakeups wake;
    std::lock_guard lock(where.s.mutex);
    const auto found = table_.find(where);
    if (!found) return;  // applies when the host is next tracked (find_or_create)
    host_entry& e = *found;
    const auto now = time_.now();
    // Its registry entry from the same config: mid-reload (reapply_config has not reached
    // it yet) the one it holds is the old config's, which its new policy would not keep.
    e.override_entry = cfg->override_for(key, utc_today());
    // A lower limit admits nothing new until in flight falls under it.
    replace_policy_locked(e, policy_with(cfg, e.override_entry, live.get()), now);
    take_live_locked(e, std::move(live), now);
    apply_health(e, now);
    wake.run_gate(e, now);
}

}  // namespace politeproxy
