#include "politeproxy/exchange/live_overrides.hpp"

#include "politeproxy/base/log.hpp"
#include "politeproxy/exchange/host_gates.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace politeproxy {

namespace {

// The state file's new text, written next to it and renamed over it.
bool write_atomically(const std::string& path, const std::string& text, std::string& error) {
    const std::string fresh = path + ".new";
    std::FILE* f = std::fopen(fresh.c_str(), "w");
    if (!f) {
        error = "cannot write " + fresh;
        return false;
    }
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                         ::fsync(::fileno(f)) == 0;
    if (std::fclose(f) != 0 || !written || std::rename(fresh.c_str(), path.c_str()) != 0) {
        error = "cannot write " + path;
        std::remove(fresh.c_str());
        return false;
    }
    return true;
}

}  // namespace

void live_overrides::load_state(wall_clock::time_point now) {
    if (state_file_.empty()) return;
    std::ifstream in(state_file_, std::ios::binary);
    if (!in) return;  // none yet
    std::ostringstream text;
    text << in.rdbuf();
    auto parsed = parse_state_file(text.str());
    if (auto* bad = std::get_if<std::string>(&parsed)) {
        log_.write(log_level::error, "overrides",
                   "admin.state_file " + state_file_ + " refused (" + *bad + "): starting without its overrides");
        return;
    }
    std::lock_guard lock(mutex_);
    std::size_t kept = 0;
    for (auto& o : std::get<0>(parsed)) {
        if (o.expired(now)) continue;
        const std::string key = o.key;
        auto shared = std::make_shared<const live_override>(std::move(o));
        by_key_[key] = shared;
        gates_.set_live_override(key, std::move(shared));
        ++kept;
    }
    log_.write(log_level::info, "overrides", "read " + std::to_string(kept) + " overrides from " + state_file_);
}

void live_overrides::put(live_override o) {
    const std::string key = o.key;
    const std::string who = o.set_by;
    auto shared = std::make_shared<const live_override>(std::move(o));
    std::lock_guard lock(mutex_);
    replace_locked(key, shared, who);
    if (sync_) {
        std::optional<std::chrono::milliseconds> ttl;
        if (shared->expires_at)
            ttl = std::max(std::chrono::ceil<std::chrono::milliseconds>(*shared->expires_at - wall_clock::now()),
                           std::chrono::milliseconds(1));
        sync_->put(key, to_json(*shared), ttl);
    }
    save_locked(false);
}

live_overrides::removal live_overrides::remove(const std::string& key, std::string_view by) {
    std::lock_guard lock(mutex_);
    const bool had = replace_locked(key, nullptr, by);
    if (had) save_locked(false);
    if (sync_) sync_->remove(key);  // also when this process had none: another may have
    return had ? removal::removed : sync_ ? removal::sent_to_fleet : removal::none;
}

void live_overrides::heard(const std::string& key, const std::optional<std::string>& value,
                           wall_clock::time_point now) {
    std::shared_ptr<const live_override> next;
    if (value) {
        auto parsed = override_from_json(*value);
        if (!parsed || parsed->key != key) {
            log_.write(log_level::warn, "overrides", "the fleet store holds no valid override for " + key + ": ignored");
            return;
        }
        if (!parsed->expired(now)) next = std::make_shared<const live_override>(std::move(*parsed));
    }
    std::lock_guard lock(mutex_);
    const auto it = by_key_.find(key);
    const bool same = it == by_key_.end() ? !next : next && to_json(*it->second) == to_json(*next);
    if (same) return;  // this process's own change, back from the store
    const std::string who = next ? next->set_by + " (through the fleet)" : std::string("the fleet");
    replace_locked(key, std::move(next), who);
    save_locked(false);
}

void live_overrides::tick(wall_clock::time_point now) {
    std::lock_guard lock(mutex_);
    std::vector<std::string> expired;
    for (const auto& [key, o] : by_key_)
        if (o->expired(now)) expired.push_back(key);
    for (const auto& key : expired) replace_locked(key, nullptr, "expiry");
    if (unsaved_ || !expired.empty()) save_locked(true);
}

void live_overrides::flush() {
    std::lock_guard lock(mutex_);
    const bool queued = [&] {  // a write handed to write_off_ that has not run (it may never: shutdown)
        std::lock_guard writes_lock(writes_->mutex);
        return writes_->done < saves_;
    }();
    if (unsaved_ || queued) save_locked(true, true);
}

bool live_overrides::replace_locked(const std::string& key, std::shared_ptr<const live_override> next,
                                    std::string_view who) {
    const auto it = by_key_.find(key);
    std::shared_ptr<const live_override> before = it == by_key_.end() ? nullptr : it->second;
    if (!before && !next) return false;
    std::string line = "override " + key + " by " + std::string(who) + ": " + summary_of(before.get()) + " -> " +
                       summary_of(next.get());
    const std::string& reason = next ? next->reason : before->reason;
    if (!reason.empty()) line += ", reason \"" + reason + "\"";
    log_.write(log_level::info, "overrides", line);
    if (next) by_key_[key] = next;
    else by_key_.erase(it);
    gates_.set_live_override(key, std::move(next));
    return true;
}

void live_overrides::save_locked(bool at_once, bool here) {
    if (state_file_.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (!at_once && now - saved_at_ < save_spacing) {
        unsaved_ = true;  // the next tick writes it
        return;
    }
    unsaved_ = false;
    saved_at_ = now;
    std::vector<live_override> all;
    all.reserve(by_key_.size());
    for (const auto& [key, o] : by_key_) all.push_back(*o);
    auto job = [path = state_file_, text = state_file_text(all), seq = ++saves_, writes = writes_, &log = log_] {
        std::lock_guard lock(writes->mutex);
        if (seq <= writes->done) return;  // a newer one is written already
        writes->done = seq;
        std::string error;
        if (!write_atomically(path, text, error))
            log.write(log_level::error, "overrides", "admin.state_file: " + error + ": the overrides last until a restart");
    };
    if (write_off_ && !here) write_off_(std::move(job));
    else job();
}

std::vector<std::shared_ptr<const live_override>> live_overrides::list() const {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<const live_override>> out;
    out.reserve(by_key_.size());
    const auto now = wall_clock::now();
    for (const auto& [key, o] : by_key_)
        if (!o->expired(now)) out.push_back(o);  // not yet ticked away
    return out;
}

std::shared_ptr<const live_override> live_overrides::find(const std::string& key) const {
    std::lock_guard lock(mutex_);
    const auto it = by_key_.find(key);
    return it == by_key_.end() || it->second->expired(wall_clock::now()) ? nullptr : it->second;
}

std::vector<fleet::override_sync::entry> live_overrides::known(wall_clock::time_point now) const {
    std::lock_guard lock(mutex_);
    std::vector<fleet::override_sync::entry> out;
    for (const auto& [key, o] : by_key_) {
        if (o->expired(now)) continue;
        std::optional<std::chrono::milliseconds> ttl;
        if (o->expires_at) ttl = std::chrono::ceil<std::chrono::milliseconds>(*o->expires_at - now);
        out.push_back({key, to_json(*o), ttl});
    }
    return out;
}

}  // namespace politeproxy
