#pragma once
// fleet_client's inside, shared by fleet_client.cpp (acquires, renewals, the store's
// state) and fleet_client_releases.cpp (releases and handovers). Not for other includers.
#include "politeproxy/fleet/fleet_client.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/fleet/cluster_slots.hpp"
#include "politeproxy/fleet/lease_scripts.hpp"
#include "politeproxy/fleet/redis_store.hpp"
#include "politeproxy/policy/fleet_lease.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>

namespace politeproxy::fleet {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace client_detail {

// The store keeps a host's shared limit, rate, pause and bucket this long after the last
// grant or decision (longer while a pause runs): about as long as a process remembers an
// idle host, so a host that comes back after a quiet spell starts from its configuration.
constexpr auto shared_state_ttl = std::chrono::minutes(2);
// A process that stopped asking for a host this long ago loses its place in the fleet's
// queue (see acquire_script; host_gates re-asks at least every 200 ms while it waits).
constexpr auto waiter_stale = std::chrono::milliseconds(500);
// A lease id carries its lane in the top bits: a release finds the lane that renews it.
constexpr int lane_shift = 48;
// Members per command (a command's arguments are bounded: redis_command's 128).
constexpr std::size_t most_wanted = 16;
constexpr std::size_t most_given = 40;
constexpr std::size_t most_released = 30;  // plus a state key per host given tokens back

inline std::string ms(clock::duration d) {
    return std::to_string(std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(d).count()));
}

inline std::string decimal(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", v);
    return text;
}

inline std::uint64_t random_tag() {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

inline std::vector<std::string> script_loads() {
    std::vector<std::string> out;
    for (const lua_script* s : {&acquire_script(), &release_script(), &renew_script(), &publish_script(), &withdraw_script()})
        out.push_back(redis_command({"SCRIPT", "LOAD", s->body}));
    return out;
}

}  // namespace client_detail
using namespace client_detail;

struct fleet_client::impl {
    // A request's acquire, waiting for its batch's answer.
    struct wanted {
        std::uint64_t id;
        std::string member;
        clock::time_point sent;
        std::move_only_function<void(lease_answer)> done;
    };
    // A lease granted with spare tokens, from its grant until it goes back to the store:
    // handed on while it has some left, is younger than handover_life and the store has
    // not come or gone since.
    struct chain {
        std::size_t spares = 0;
        double token_ms = 0;  // the bucket's time of one token (given back if not spent)
        clock::time_point ends;
        std::uint64_t epoch = 0;  // the lane's store_epoch at the grant
        lease_answer answer;      // what a handover answers: the grant's figures
    };
    // A lease given back, not yet sent: the bucket time of the spare tokens it did not spend.
    struct given_lease {
        std::uint64_t id;
        clock::time_point at;
        double refund_ms = 0;
    };
    // A lease given back with spare tokens, for the process's next request of its host
    // (any lane's) until release_linger has passed.
    struct parked_lease {
        std::uint64_t id;
        clock::time_point at;
        chain* spare;  // in its lane's chains
    };
    // One host's acquires of this event-loop turn and leases given back, not yet sent.
    struct host_batch {
        lease_terms terms;
        std::vector<wanted> acquires;
        std::vector<given_lease> given;
    };
    // A lease taken from the batches to be sent back: its host, its member in the store.
    struct taken {
        const std::string* host;
        std::string member;
        double refund_ms;
    };
    // One worker's share of the client.
    struct lane {
        lane(impl& owner, asio::io_context& ioc, std::size_t index)
            : ioc(ioc),
              index(index),
              book(owner.tag),
              store(make_redis_store(ioc, owner.cfg, owner.log, script_loads(),
                                     [&owner, this](bool came_up) { owner.on_lane_state(*this, came_up); })),
              linger(ioc.get_executor()) {}

        asio::io_context& ioc;
        std::size_t index;
        // Releases, holds and handovers come from any thread.
        std::mutex mutex;  ///< guards book, chains, parked, store_epoch
        lease_book book;
        std::unordered_map<std::uint64_t, chain> chains;  ///< leases with spare tokens, by id
        std::unordered_map<std::string, std::vector<parked_lease>> parked;  ///< by host
        std::uint64_t store_epoch = 0;  ///< the store's comings and goings
        std::unique_ptr<redis_store> store;
        // On the lane's loop only:
        std::unordered_map<std::string, host_batch> batches;
        bool flush_posted = false;
        bool linger_armed = false;
        steady_timer linger;
    };

    // The Redis Cluster slot of a host's keys; one node has them all otherwise.
    std::uint16_t slot_of(const std::string& key) const {
        return cfg.kind == fleet_config::topology::cluster ? tag_slot(key) : 0;
    }

    impl(const fleet_config& cfg, metrics& m, const logger& log, callbacks cb)
        : cfg(cfg), m(m), log(log), cb(std::move(cb)), tag(random_tag()) {
        char text[20];
        std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(tag));
        tag_text = text;
    }

    lane& current_lane() {
        for (auto& l : lanes)
            if (l->ioc.get_executor().running_in_this_thread()) return *l;
        return *lanes.front();
    }

    lane& lane_of(std::uint64_t lease) { return *lanes[std::min<std::size_t>(lease >> lane_shift, lanes.size() - 1)]; }

    // EVALSHA; EVAL when the store lost its scripts (SCRIPT FLUSH): the same arguments
    // with the script's body in place of its digest. `slot`: the keys' (all one host's).
    void eval(lane& l, std::uint16_t slot, const lua_script& s, std::vector<std::string_view> args,
              redis_connection::handler done) {
        args.insert(args.begin(), {"EVALSHA", s.sha1});
        std::string command = redis_command(args);
        // The arguments after the digest, as formatted: kept for the rare EVAL.
        const std::size_t tail = command.find(s.sha1) + s.sha1.size() + 2;
        auto on_reply = [&l, slot, &s, count = args.size(), tail, command, done = std::move(done)](
                            boost::system::error_code ec, redis_reply r) mutable {
            if (!ec && r.is_error() && r.text.starts_with("NOSCRIPT")) {
                std::string eval = "*" + std::to_string(count) + "\r\n$4\r\nEVAL\r\n$" + std::to_string(s.body.size()) +
                                   "\r\n" + s.body + "\r\n";
                eval.append(command, tail);
                l.store->send(slot, std::move(eval), std::move(done));
                return;
            }
            done(ec, std::move(r));
        };
        l.store->send(slot, std::move(command), std::move(on_reply));
    }

    // The releases and handovers (fleet_client_releases.cpp).
    bool live(const lane& l, const chain& c, clock::time_point now) const;
    double settle_locked(lane& l, std::uint64_t id);
    void want(lane& l, const std::string& key, lease_terms terms, wanted w);
    std::optional<lease_answer> hand_on(lane& current, const std::string& key);
    std::optional<lease_answer> hand_on_from(lane& l, const std::string& key);
    void give(lane& l, const std::string& key, std::uint64_t id);
    std::optional<clock::time_point> unpark(lane& l, clock::time_point due_by);
    void arm_linger(lane& l, clock::time_point at);
    void flush(lane& l, bool lingered);
    std::vector<taken> take_given(lane& l, const std::string& key, std::size_t most,
                                  std::optional<clock::time_point> due_by);
    std::optional<clock::time_point> send_releases(lane& l, clock::time_point due_by);

    // One EVALSHA: up to most_wanted leases of `key` asked for, carrying up to most_given
    // leases given back.
    void send_acquires(lane& l, const std::string& key, host_batch& b) {
        const std::size_t wanted_n = std::min(b.acquires.size(), most_wanted);
        std::vector<wanted> batch(std::make_move_iterator(b.acquires.begin()),
                                  std::make_move_iterator(b.acquires.begin() + static_cast<std::ptrdiff_t>(wanted_n)));
        b.acquires.erase(b.acquires.begin(), b.acquires.begin() + static_cast<std::ptrdiff_t>(wanted_n));
        const auto given = take_given(l, key, most_given, std::nullopt);
        const host_keys k(key);
        std::vector<std::string> leases_keys;
        double refund_ms = 0;
        for (const auto& g : given) {
            leases_keys.push_back(leases_key(*g.host));
            if (*g.host == key) refund_ms += g.refund_ms;
        }
        const std::size_t spares = b.terms.in_flight >= 2 ? fleet_client::handover_spares : 0;
        const std::string key_count = std::to_string(4 + given.size()), limit = std::to_string(b.terms.limit),
                          rate = decimal(b.terms.rate), burst = decimal(b.terms.burst),
                          spares_text = std::to_string(spares), refund = decimal(refund_ms);
        std::vector<std::string_view> args{key_count, k.leases, k.state, k.waiters, k.polled};
        args.insert(args.end(), leases_keys.begin(), leases_keys.end());
        args.insert(args.end(), {lease_ttl_ms, limit, rate, burst, state_ttl_ms, tag_text, waiter_stale_ms, spares_text, refund});
        for (const auto& g : given) args.push_back(g.member);
        for (const auto& w : batch) args.push_back(w.member);
        eval(l, slot_of(key), acquire_script(), std::move(args),
             [this, &l, key, spares, batch = std::move(batch)](boost::system::error_code ec, redis_reply reply) mutable {
                 answered(l, key, std::move(batch), spares, ec, reply);
             });
    }

    // The first `granted` of the batch have their lease (and up to `spares` spare tokens
    // each, as many as the store took); the others are refused (or the store is down for
    // all of them).
    void answered(lane& l, const std::string& key, std::vector<wanted> batch, std::size_t spares,
                  boost::system::error_code ec, const redis_reply& reply) {
        const auto now = clock::now();
        std::optional<lease_answer> read;
        if (!ec) {
            read = read_acquire_reply(reply);
            // A slot mid-migration or unserved past fleet.timeout is no surprise: the
            // requests wait (or take their share) as when the store is down.
            if (!read && !is_try_again(reply.text) && !is_cluster_down(reply.text))
                log.write(log_level::error, "fleet", "unexpected answer to acquire: " + reply.text);
        }
        if (read && read->granted > 0) {
            std::lock_guard lock(l.mutex);
            std::size_t spares_left = read->rate > 0 ? read->spares : 0;
            for (std::size_t i = 0; i < std::min(read->granted, batch.size()); ++i) {
                l.book.add(batch[i].id, key, now);
                if (spares_left == 0) continue;
                const auto own = std::min(spares, spares_left);
                spares_left -= own;
                lease_answer a = *read;
                a.what = lease_answer::result::granted;
                l.chains.emplace(batch[i].id, chain{own, 1000 / read->rate, now + fleet_client::handover_life, l.store_epoch, a});
            }
        }
        for (std::size_t i = 0; i < batch.size(); ++i) {
            lease_answer a;
            if (read) {
                a = *read;
                a.what = i < read->granted ? lease_answer::result::granted : lease_answer::result::refused;
                if (a.what == lease_answer::result::granted) a.lease = batch[i].id;
            }
            m.fleet_round_trip(now - batch[i].sent);
            batch[i].done(a);
        }
    }

    // Under l.mutex, on l's loop. A lease released after it was picked for renewal is
    // given back after the renewal is sent (a release waits for its linger on this loop),
    // so the renewal cannot re-assert a finished request; on a cluster a renewal retried
    // (TRYAGAIN) may still land after it: the lease then lives until its TTL, a slot
    // held too long, never one too many.
    void renew_locked(lane& l, std::vector<lease_book::batch> batches) {
        for (auto& [key, ids] : batches) {
            const host_keys k(key);
            const std::string ttl = ms(cfg.lease_ttl);
            std::vector<std::string> members;
            for (auto id : ids) members.push_back(l.book.member(id));
            std::vector<std::string_view> args{"1", k.leases, ttl};
            args.insert(args.end(), members.begin(), members.end());
            eval(l, slot_of(key), renew_script(), std::move(args), [this, key](boost::system::error_code ec, redis_reply r) {
                const auto answer = ec ? std::nullopt : read_renew_reply(r);
                if (!answer) return;
                if (answer->lost > 0) {
                    m.fleet_leases_lost(answer->lost);
                    log.write(log_level::warn, "fleet",
                              std::to_string(answer->lost) + " lease(s) of " + key + " had gone from the store: re-asserted");
                }
                if (cb.on_held) cb.on_held(key, answer->held);
            });
        }
    }

    void on_lane_state(lane& l, bool came_up) {
        {
            std::lock_guard lock(l.mutex);
            ++l.store_epoch;  // no handover of a lease granted before
            if (came_up) renew_locked(l, l.book.take_all(clock::now()));  // re-assert what this lane holds
        }
        bool all_up = true;
        for (auto& each : lanes) all_up = all_up && each->store->up();
        std::lock_guard lock(state_mutex);
        if (all_up != store_up.exchange(all_up, std::memory_order_acq_rel)) m.fleet_store(all_up);
        // Every change: a cluster's node may have come or gone while the whole is still down.
        if (cb.on_store_state) cb.on_store_state(all_up);
    }

    task<void> renewal_loop(lane& l) {
        steady_timer tick(l.ioc.get_executor());
        const auto period = std::min<clock::duration>(cfg.lease_ttl / 6, 1s);
        auto last = clock::now();
        for (;;) {
            tick.expires_after(period);
            if (auto [ec] = co_await tick.async_wait(use_tuple); ec) co_return;
            const auto now = clock::now();
            if (l.index == 0 && !store_up.load(std::memory_order_acquire)) m.fleet_degraded(now - last);
            last = now;
            std::lock_guard lock(l.mutex);
            renew_locked(l, l.book.due(now, cfg.lease_ttl / 3));
        }
    }

    const fleet_config& cfg;
    metrics& m;
    const logger& log;
    callbacks cb;
    std::uint64_t tag;
    std::string tag_text;
    std::vector<std::unique_ptr<lane>> lanes;
    std::mutex state_mutex;  ///< the order of on_store_state calls
    std::atomic<bool> store_up{false};
    bool started = false;
    // Arguments every acquire sends, formatted once.
    const std::string lease_ttl_ms = ms(cfg.lease_ttl);
    const std::string state_ttl_ms = ms(std::max<clock::duration>(shared_state_ttl, cfg.lease_ttl));
    const std::string waiter_stale_ms = ms(waiter_stale);
};

}  // namespace politeproxy::fleet
