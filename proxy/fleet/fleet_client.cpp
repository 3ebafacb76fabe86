#include "politeproxy/fleet/fleet_client.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/fleet/lease_scripts.hpp"
#include "politeproxy/fleet/redis_connection.hpp"
#include "politeproxy/policy/fleet_lease.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <cstdio>
#include <mutex>
#include <random>

namespace politeproxy::fleet {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// The store keeps a host's shared limit, rate, pause and bucket this long after the last
// grant or decision (longer while a pause runs): about as long as a process remembers an
// idle host, so a host that comes back after a quiet spell starts from its configuration.
constexpr auto shared_state_ttl = std::chrono::minutes(2);
// A process that stopped asking for a host this long ago loses its place in the fleet's
// queue (see acquire_script; host_gates re-asks at least every 200 ms while it waits).
constexpr auto waiter_stale = std::chrono::milliseconds(500);
// A lease id carries its lane in the top bits: a release finds the lane that renews it.
constexpr int lane_shift = 48;

std::string ms(clock::duration d) {
    return std::to_string(std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(d).count()));
}

std::string decimal(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", v);
    return text;
}

std::uint64_t random_tag() {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

std::vector<std::string> script_loads() {
    std::vector<std::string> out;
    for (const lua_script* s : {&acquire_script(), &renew_script(), &publish_script(), &withdraw_script()})
        out.push_back(redis_command({"SCRIPT", "LOAD", s->body}));
    return out;
}

}  // namespace

struct fleet_client::impl {
    // One worker's share of the client.
    struct lane {
        lane(impl& owner, asio::io_context& ioc, std::size_t index)
            : ioc(ioc),
              index(index),
              book(owner.tag),
              conn(ioc, redis_target{owner.cfg.host, owner.cfg.port, owner.cfg.password, owner.cfg.db},
                   owner.cfg.timeout, owner.log, script_loads(), [&owner, this](bool up) { owner.on_lane_state(*this, up); }) {}

        asio::io_context& ioc;
        std::size_t index;
        std::mutex mutex;  ///< book, and the order of renewals against releases
        lease_book book;
        redis_connection conn;
        bool up = false;  ///< under impl::state_mutex
    };

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
    // with the script's body in place of its digest.
    void eval(lane& l, const lua_script& s, std::vector<std::string_view> args, redis_connection::handler done) {
        args.insert(args.begin(), {"EVALSHA", s.sha1});
        std::string command = redis_command(args);
        // The arguments after the digest, as formatted: kept for the rare EVAL.
        const std::size_t tail = command.find(s.sha1) + s.sha1.size() + 2;
        auto on_reply = [&l, &s, count = args.size(), tail, command, done = std::move(done)](
                            boost::system::error_code ec, redis_reply r) mutable {
            if (!ec && r.is_error() && r.text.starts_with("NOSCRIPT")) {
                std::string eval = "*" + std::to_string(count) + "\r\n$4\r\nEVAL\r\n$" + std::to_string(s.body.size()) +
                                   "\r\n" + s.body + "\r\n";
                eval.append(command, tail);
                l.conn.send(std::move(eval), std::move(done));
                return;
            }
            done(ec, std::move(r));
        };
        l.conn.send(std::move(command), std::move(on_reply));
    }

    template <class Token>
    auto async_eval(lane& l, const lua_script& s, std::vector<std::string_view> args, Token&& token) {
        return asio::async_initiate<Token, void(boost::system::error_code, redis_reply)>(
            [this, &l, &s](auto done, std::vector<std::string_view> args) {
                eval(l, s, std::move(args), redis_connection::on_callers_executor(std::move(done)));
            },
            token, std::move(args));
    }

    // Under l.mutex, on l's loop, as releases are: a lease released after it was picked
    // for renewal has its release queued after the renewal, never before (which would
    // re-assert a finished request).
    void renew_locked(lane& l, std::vector<lease_book::batch> batches) {
        for (auto& [key, ids] : batches) {
            const host_keys k(key);
            const std::string ttl = ms(cfg.lease_ttl);
            std::vector<std::string> members;
            for (auto id : ids) members.push_back(l.book.member(id));
            std::vector<std::string_view> args{"1", k.leases, ttl};
            args.insert(args.end(), members.begin(), members.end());
            eval(l, renew_script(), std::move(args), [this, key](boost::system::error_code ec, redis_reply r) {
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

    void on_lane_state(lane& l, bool up) {
        if (up) {
            std::lock_guard lock(l.mutex);
            renew_locked(l, l.book.take_all(clock::now()));  // re-assert what this lane holds
        }
        bool changed = false;
        bool all_up = false;
        {
            std::lock_guard lock(state_mutex);
            l.up = up;
            if (up) ++lanes_up;
            else --lanes_up;
            all_up = lanes_up == lanes.size();
            changed = all_up != store_up.load(std::memory_order_relaxed);
            store_up.store(all_up, std::memory_order_release);
        }
        if (!changed) return;
        m.fleet_store(all_up);
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
            if (!l.conn.up()) continue;
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
    std::mutex state_mutex;
    std::size_t lanes_up = 0;  ///< under state_mutex
    std::atomic<bool> store_up{false};
    bool started = false;
    // Arguments every acquire sends, formatted once.
    const std::string lease_ttl_ms = ms(cfg.lease_ttl);
    const std::string state_ttl_ms = ms(std::max<clock::duration>(shared_state_ttl, cfg.lease_ttl));
    const std::string waiter_stale_ms = ms(waiter_stale);
};

fleet_client::fleet_client(const fleet_config& cfg, metrics& m, const logger& log, callbacks cb) : cfg_(cfg) {
    impl_ = std::make_unique<impl>(cfg_, m, log, std::move(cb));
    m.enable_fleet();
}

fleet_client::~fleet_client() { stop(); }

void fleet_client::add_lane(asio::io_context& ioc) {
    impl_->lanes.push_back(std::make_unique<impl::lane>(*impl_, ioc, impl_->lanes.size()));
}

bool fleet_client::start() {
    impl_->started = true;
    for (auto& l : impl_->lanes) {
        l->conn.start();
        asio::co_spawn(l->ioc, impl_->renewal_loop(*l), asio::detached);
    }
    // The loops' threads are not running yet: run them here until every lane is up.
    const auto deadline = clock::now() + cfg_.timeout;
    while (!store_up() && clock::now() < deadline)
        for (auto& l : impl_->lanes) l->ioc.run_one_for(std::chrono::milliseconds(1));
    for (auto& l : impl_->lanes)
        if (l->ioc.stopped()) l->ioc.restart();
    return store_up();
}

void fleet_client::stop() {
    if (!impl_->started) return;
    impl_->started = false;
    for (auto& l : impl_->lanes) l->conn.close_now();
}

bool fleet_client::store_up() const { return impl_->store_up.load(std::memory_order_acquire); }

task<lease_answer> fleet_client::acquire(const std::string& key, lease_terms terms) {
    lease_answer answer;
    auto& l = impl_->current_lane();
    if (!l.conn.up()) co_return answer;
    std::uint64_t id;
    std::string member;
    {
        std::lock_guard lock(l.mutex);
        id = (static_cast<std::uint64_t>(l.index) << lane_shift) | l.book.next_id();
        member = l.book.member(id);
    }
    const host_keys k(key);
    const std::string limit = std::to_string(terms.limit), rate = decimal(terms.rate), burst = decimal(terms.burst);
    std::vector<std::string_view> args{"4",   k.leases, k.state, k.waiters,        k.polled,
                                       member, impl_->lease_ttl_ms, limit, rate, burst,
                                       impl_->state_ttl_ms, impl_->tag_text, impl_->waiter_stale_ms};
    const auto sent = clock::now();
    auto [ec, reply] = co_await impl_->async_eval(l, acquire_script(), std::move(args), use_tuple);
    const auto now = clock::now();
    impl_->m.fleet_round_trip(now - sent);
    if (ec) co_return answer;
    auto read = read_acquire_reply(reply);
    if (!read) {
        impl_->log.write(log_level::error, "fleet", "unexpected answer to acquire: " + reply.text);
        co_return answer;
    }
    answer = *read;
    if (answer.what == lease_answer::result::granted) {
        std::lock_guard lock(l.mutex);
        l.book.add(id, key, now);
        answer.lease = id;
    }
    co_return answer;
}

void fleet_client::release(const std::string& key, std::uint64_t lease) {
    auto& l = impl_->lane_of(lease);
    std::lock_guard lock(l.mutex);
    if (!l.book.remove(lease) || !impl_->started) return;
    l.conn.send(redis_command({"ZREM", host_keys(key).leases, l.book.member(lease)}),
                [](boost::system::error_code, redis_reply) {});
}

std::uint64_t fleet_client::hold_unasserted(const std::string& key) {
    auto& l = impl_->current_lane();
    std::lock_guard lock(l.mutex);
    const auto id = (static_cast<std::uint64_t>(l.index) << lane_shift) | l.book.next_id();
    l.book.add(id, key, clock::now());
    return id;
}

void fleet_client::publish(const std::string& key, std::size_t limit, double rate, clock::duration pause) {
    const host_keys k(key);
    const std::string limit_text = std::to_string(limit), rate_text = decimal(rate), pause_text = ms(pause);
    impl_->eval(impl_->current_lane(), publish_script(),
                {"1", k.state, limit_text, rate_text, pause_text, impl_->state_ttl_ms},
                [](boost::system::error_code, redis_reply) {});
}

void fleet_client::withdraw(const std::string& key) {
    const host_keys k(key);
    impl_->eval(impl_->current_lane(), withdraw_script(), {"2", k.waiters, k.polled, impl_->tag_text},
                [](boost::system::error_code, redis_reply) {});
}

}  // namespace politeproxy::fleet
