// fleet_client: leases given back, handed on to the process's next request of their host
// or sent back to the store (carried by an acquire, or after release_linger).
#include "fleet_client_impl.hpp"

namespace politeproxy::fleet {

// Under l.mutex.
bool fleet_client::impl::live(const lane& l, const chain& c, clock::time_point now) const {
    return c.spares > 0 && now < c.ends && c.epoch == l.store_epoch;
}

// Under l.mutex: the bucket time of the lease's spare tokens not spent; its chain ends.
double fleet_client::impl::settle_locked(lane& l, std::uint64_t id) {
    const auto c = l.chains.find(id);
    if (c == l.chains.end()) return 0;
    const double refund_ms = static_cast<double>(c->second.spares) * c->second.token_ms;
    l.chains.erase(c);
    return refund_ms;
}

// On l's loop: an acquire joins its host's batch, sent at the end of this turn.
void fleet_client::impl::want(lane& l, const std::string& key, lease_terms terms, wanted w) {
    auto& b = l.batches[key];
    b.terms = terms;
    b.acquires.push_back(std::move(w));
    if (std::exchange(l.flush_posted, true)) return;
    asio::post(l.ioc, [this, &l] {
        l.flush_posted = false;
        flush(l, false);
    });
}

// A lease of `key` parked with a spare token, for the caller's request: the calling
// worker's lane's first, then the others'.
std::optional<lease_answer> fleet_client::impl::hand_on(lane& current, const std::string& key) {
    if (auto a = hand_on_from(current, key)) return a;
    for (auto& l : lanes)
        if (l.get() != &current)
            if (auto a = hand_on_from(*l, key)) return a;
    return std::nullopt;
}

std::optional<lease_answer> fleet_client::impl::hand_on_from(lane& l, const std::string& key) {
    std::lock_guard lock(l.mutex);
    const auto p = l.parked.find(key);
    if (p == l.parked.end()) return std::nullopt;
    const auto now = clock::now();
    auto& leases = p->second;
    const auto it = std::find_if(leases.begin(), leases.end(), [&](const parked_lease& g) { return live(l, *g.spare, now); });
    if (it == leases.end()) return std::nullopt;
    const auto id = it->id;
    chain& c = *it->spare;
    leases.erase(it);
    lease_answer a = c.answer;
    a.lease = id;
    if (--c.spares == 0) l.chains.erase(id);
    l.book.add(id, key, now);
    if (leases.empty()) l.parked.erase(p);
    return a;
}

// On l's loop: a lease given back waits for an acquire to take it (parked, while it
// has spare tokens) or carry it (release_linger).
void fleet_client::impl::give(lane& l, const std::string& key, std::uint64_t id) {
    const auto now = clock::now();
    given_lease g{id, now};
    {
        std::lock_guard lock(l.mutex);
        const auto c = l.chains.find(id);
        if (c != l.chains.end() && live(l, c->second, now)) {
            l.parked[key].push_back({id, now, &c->second});
            return arm_linger(l, now + fleet_client::release_linger);
        }
        g.refund_ms = settle_locked(l, id);
    }
    l.batches[key].given.push_back(g);
    arm_linger(l, now + fleet_client::release_linger);
}

// On l's loop: parked leases given back by `due_by` (or whose chain ended) join the
// releases; when the next of the others is due.
std::optional<clock::time_point> fleet_client::impl::unpark(lane& l, clock::time_point due_by) {
    const auto now = clock::now();
    std::optional<clock::time_point> next;
    std::lock_guard lock(l.mutex);
    for (auto p = l.parked.begin(); p != l.parked.end();) {
        std::erase_if(p->second, [&](const parked_lease& g) {
            if (g.at > due_by && live(l, *g.spare, now)) {
                if (!next || g.at < *next) next = g.at;
                return false;
            }
            l.batches[p->first].given.push_back({g.id, g.at, settle_locked(l, g.id)});
            return true;
        });
        p = p->second.empty() ? l.parked.erase(p) : std::next(p);
    }
    return next;
}

void fleet_client::impl::arm_linger(lane& l, clock::time_point at) {
    if (std::exchange(l.linger_armed, true)) return;
    l.linger.expires_at(at);
    l.linger.async_wait([this, &l](boost::system::error_code) {
        l.linger_armed = false;
        flush(l, true);
    });
}

// Sends each host's acquires (carrying what was given back), and, at the end of a
// linger, what was given back release_linger ago without an acquire to carry it.
void fleet_client::impl::flush(lane& l, bool lingered) {
    for (auto& [key, b] : l.batches)
        while (!b.acquires.empty()) send_acquires(l, key, b);
    std::optional<clock::time_point> next;
    if (lingered) {
        // Given back at least half a linger ago: a lease given back microseconds after
        // the one that armed the timer rides with it, not with a command of its own.
        const auto due_by = clock::now() - fleet_client::release_linger / 2;
        const auto parked = unpark(l, due_by);
        next = send_releases(l, due_by);
        if (parked && (!next || *parked < *next)) next = parked;
    }
    std::erase_if(l.batches, [](const auto& entry) { return entry.second.acquires.empty() && entry.second.given.empty(); });
    if (next) arm_linger(l, *next + fleet_client::release_linger);
}

// Leases given back, at most `most`: `key`'s first, then (not a cluster: a script's
// keys share a slot) other hosts'. `due_by` (the linger's end): those given back by
// then. Else (an acquire carries them): every one of `key`'s, and other hosts' that
// give no tokens back (their bucket is not the acquire's).
std::vector<fleet_client::impl::taken> fleet_client::impl::take_given(lane& l, const std::string& key, std::size_t most,
                              std::optional<clock::time_point> due_by) {
    std::vector<taken> out;
    auto take_from = [&](const std::string& host, host_batch& b) {
        const bool own = host == key;
        std::erase_if(b.given, [&](const given_lease& g) {
            if (out.size() == most) return false;
            const bool take = due_by ? g.at <= *due_by : own || g.refund_ms <= 0;
            if (take) out.push_back({&host, l.book.member(g.id), g.refund_ms});
            return take;
        });
    };
    const auto it = l.batches.find(key);
    if (it != l.batches.end()) take_from(it->first, it->second);
    if (cfg.kind != fleet_config::topology::cluster)
        for (auto& [host, b] : l.batches)
            if (host != key) take_from(host, b);
    return out;
}

// The releases no acquire carried, given back by `due_by`: one command per
// most_released (per host on a cluster). When the next of the others is due.
std::optional<clock::time_point> fleet_client::impl::send_releases(lane& l, clock::time_point due_by) {
    for (auto& [key, b] : l.batches)
        for (;;) {
            const auto given = take_given(l, key, most_released, due_by);
            if (given.empty()) break;
            // Spare tokens not spent, summed per host: given back to its bucket.
            std::vector<std::pair<const std::string*, double>> refunds;
            for (const auto& g : given) {
                if (g.refund_ms <= 0) continue;
                auto same = std::find_if(refunds.begin(), refunds.end(), [&](const auto& r) { return *r.first == *g.host; });
                if (same == refunds.end()) same = refunds.insert(refunds.end(), {g.host, 0.0});
                same->second += g.refund_ms;
            }
            // KEYS: the leases keys, then the state keys; ARGV: how many leases, their
            // members, the bucket time per state key.
            std::vector<std::string> keys, texts;
            for (const auto& g : given) keys.push_back(leases_key(*g.host));
            for (const auto& [host, refund_ms] : refunds) {
                keys.push_back(host_keys(*host).state);
                texts.push_back(decimal(refund_ms));
            }
            const std::string key_count = std::to_string(keys.size()), lease_count = std::to_string(given.size());
            std::vector<std::string_view> args{key_count};
            args.insert(args.end(), keys.begin(), keys.end());
            args.push_back(lease_count);
            for (const auto& g : given) args.push_back(g.member);
            args.insert(args.end(), texts.begin(), texts.end());
            eval(l, slot_of(key), release_script(), std::move(args), [](boost::system::error_code, redis_reply) {});
        }
    std::optional<clock::time_point> next;
    for (const auto& [key, b] : l.batches)
        for (const auto& g : b.given)
            if (!next || g.at < *next) next = g.at;
    return next;
}

}  // namespace politeproxy::fleet
