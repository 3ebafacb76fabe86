#include "politeproxy/exchange/group_gates.hpp"

namespace politeproxy {

std::shared_ptr<group_gate> group_gates::find_or_create(const config::group_caps& caps, level at,
                                                        const std::string& key) {
    const auto limit = cap(caps, at);
    if (!limit) return nullptr;
    auto& slot = gates_[static_cast<std::size_t>(at)][key];
    if (!slot) slot = std::make_shared<group_gate>(*limit);
    return slot;
}

void group_gates::set_caps(const config::group_caps& caps, std::vector<group_gate::waiter*>& granted) {
    for (std::size_t i = 0; i < level_count; ++i) {
        const auto limit = cap(caps, static_cast<level>(i));
        if (!limit) continue;
        for (auto& [key, g] : gates_[i]) {
            g->set_limit(*limit);
            g->advance(granted);
        }
    }
}

std::size_t group_gates::evict_idle() {
    std::size_t evicted = 0;
    for (auto& gates : gates_)
        evicted += std::erase_if(gates, [](const auto& kv) { return kv.second.use_count() == 1 && kv.second->idle(); });
    return evicted;
}

}  // namespace politeproxy
