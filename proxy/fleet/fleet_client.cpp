#include "politeproxy/fleet/fleet_client.hpp"

#include "politeproxy/admin/metrics.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/fleet/lease_scripts.hpp"
#include "politeproxy/fleet/redis_connection.hpp"
#include "politeproxy/policy/fleet_lease.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

namespace politeproxy::fleet {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// The store keeps a host's shared limit, rate, pause and bucket this long after the last
// grant or decision (longer while a pause runs): about as long as a process remembers an
// idle host, so a host that comes back after a quiet spell starts from its configuration.
constexpr auto shared_state_ttl = std::chrono::minutes(2);
// A process that stopped asking for a host this long ago loses its place in the fleet's
// queue (see acquire_script; host_gates re-asks at least every fleet_place_keepalive).
constexpr auto waiter_stale = std::chrono::milliseconds(500);

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

const lua_script* const all_scripts[] = {&acquire_script(), &release_script(), &renew_script(), &publish_script(),
                                         &withdraw_script()};

std::vector<std::string> script_loads() {
    std::vector<std::string> out;
    for (const lua_script* s : all_scripts) out.push_back(redis_command({"SCRIPT", "LOAD", s->body}));
    return out;
}

bool integers(const redis_reply& r, std::size_t n) {
    if (r.type != redis_reply::kind::array || r.elements.size() != n) return false;
    for (const auto& e : r.elements)
        if (e.type != redis_reply::kind::integer) return false;
    return true;
}

}  // namespace

struct fleet_client::impl {
    impl(const fleet_config& cfg, metrics& m, const logger& log, callbacks cb)
        : cfg(cfg),
          m(m),
          log(log),
          cb(std::move(cb)),
          tag(random_tag()),
          book(tag),
          conn(ioc, redis_target{cfg.host, cfg.port, cfg.password, cfg.db}, cfg.timeout, log, script_loads(),
               [this](bool up) { on_state(up); }) {
        char text[20];
        std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(tag));
        tag_text = text;
    }

    // EVALSHA, and EVAL when the store lost its scripts (SCRIPT FLUSH). Under `mutex`
    // where the order against other commands matters (see renew_locked).
    void eval(const lua_script& s, std::vector<std::string> args, redis_connection::handler done) {
        args.insert(args.begin(), {"EVALSHA", s.sha1});
        std::string command = redis_command(args);
        conn.send(std::move(command), [this, &s, args = std::move(args), done = std::move(done)](
                                          boost::system::error_code ec, redis_reply r) mutable {
            if (!ec && r.is_error() && r.text.starts_with("NOSCRIPT")) {
                args[0] = "EVAL";
                args[1] = s.body;
                conn.send(redis_command(args), std::move(done));
                return;
            }
            done(ec, std::move(r));
        });
    }

    template <class Token>
    auto async_eval(const lua_script& s, std::vector<std::string> args, Token&& token) {
        return asio::async_initiate<Token, void(boost::system::error_code, redis_reply)>(
            [this, &s](auto done, std::vector<std::string> args) {
                eval(s, std::move(args), redis_connection::on_callers_executor(std::move(done)));
            },
            token, std::move(args));
    }

    // Renewals go out under `mutex`, as releases do: a lease released after it was picked
    // for renewal has its ZREM queued after the renewal, never before (which would
    // re-assert a finished request).
    void renew_locked(std::vector<lease_book::batch> batches) {
        for (auto& [key, ids] : batches) {
            const host_keys k(key);
            std::vector<std::string> args{"1", k.leases, ms(cfg.lease_ttl)};
            for (auto id : ids) args.push_back(book.member(id));
            eval(renew_script(), std::move(args), [this, key](boost::system::error_code ec, redis_reply r) {
                if (ec || !integers(r, 2)) return;
                if (const auto lost = r.elements[0].integer; lost > 0) {
                    m.fleet_leases_lost(static_cast<std::size_t>(lost));
                    log.write(log_level::warn, "fleet",
                              std::to_string(lost) + " lease(s) of " + key + " had gone from the store: re-asserted");
                }
                if (cb.on_held) cb.on_held(key, static_cast<std::size_t>(r.elements[1].integer));
            });
        }
    }

    void on_state(bool up) {
        m.fleet_store(up);
        if (up) {
            std::lock_guard lock(mutex);
            renew_locked(book.take_all(clock::now()));  // re-assert what we hold
        }
        {
            std::lock_guard lock(start_mutex);
            ever_up = ever_up || up;
        }
        start_cv.notify_all();
        if (cb.on_store_state) cb.on_store_state(up);
    }

    task<void> renewal_loop() {
        steady_timer tick(ioc.get_executor());
        const auto period = std::min<clock::duration>(cfg.lease_ttl / 6, 1s);
        auto last = clock::now();
        for (;;) {
            tick.expires_after(period);
            if (auto [ec] = co_await tick.async_wait(use_tuple); ec) co_return;
            const auto now = clock::now();
            if (!conn.up()) m.fleet_degraded(now - last);
            last = now;
            if (!conn.up()) continue;
            std::lock_guard lock(mutex);
            renew_locked(book.due(now, cfg.lease_ttl / 3));
        }
    }

    const fleet_config& cfg;
    metrics& m;
    const logger& log;
    callbacks cb;
    std::uint64_t tag;
    std::string tag_text;
    std::mutex mutex;  ///< book, and the order of renewals against releases
    lease_book book;
    asio::io_context ioc{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
    redis_connection conn;
    std::thread thread;
    std::mutex start_mutex;
    std::condition_variable start_cv;
    bool ever_up = false;
};

fleet_client::fleet_client(const fleet_config& cfg, metrics& m, const logger& log, callbacks cb) : cfg_(cfg) {
    impl_ = std::make_unique<impl>(cfg_, m, log, std::move(cb));
    m.enable_fleet();
}

fleet_client::~fleet_client() { stop(); }

bool fleet_client::start() {
    impl_->conn.start();
    asio::co_spawn(impl_->ioc, impl_->renewal_loop(), asio::detached);
    impl_->thread = std::thread([this] { impl_->ioc.run(); });
    std::unique_lock lock(impl_->start_mutex);
    return impl_->start_cv.wait_for(lock, cfg_.timeout + 100ms, [this] { return impl_->ever_up; });
}

void fleet_client::stop() {
    if (!impl_->thread.joinable()) return;
    impl_->conn.stop();
    impl_->work.reset();
    asio::post(impl_->ioc, [this] { impl_->ioc.stop(); });
    impl_->thread.join();
}

bool fleet_client::store_up() const { return impl_->conn.up(); }

task<lease_answer> fleet_client::acquire(const std::string& key, lease_terms terms) {
    lease_answer answer;
    if (!impl_->conn.up()) co_return answer;
    std::uint64_t id;
    std::string member;
    {
        std::lock_guard lock(impl_->mutex);
        id = impl_->book.next_id();
        member = impl_->book.member(id);
    }
    const host_keys k(key);
    std::vector<std::string> args{"4", k.leases, k.state, k.waiters, k.polled, std::move(member),
                                  ms(cfg_.lease_ttl), std::to_string(terms.limit), decimal(terms.rate),
                                  decimal(terms.burst), ms(std::max<clock::duration>(shared_state_ttl, cfg_.lease_ttl)),
                                  impl_->tag_text, ms(waiter_stale)};
    const auto sent = clock::now();
    auto [ec, reply] = co_await impl_->async_eval(acquire_script(), std::move(args), use_tuple);
    const auto now = clock::now();
    impl_->m.fleet_round_trip(now - sent);
    if (ec) co_return answer;
    if (!integers(reply, 6)) {
        impl_->log.write(log_level::error, "fleet", "unexpected answer to acquire: " + reply.text);
        co_return answer;
    }
    const auto& e = reply.elements;
    answer.what = e[0].integer == 1 ? lease_answer::result::granted : lease_answer::result::refused;
    answer.held = static_cast<std::size_t>(std::max<long long>(0, e[1].integer));
    answer.limit = static_cast<std::size_t>(std::max<long long>(1, e[2].integer));
    answer.rate = static_cast<double>(e[3].integer) / 1e6;
    answer.paused_for = std::chrono::milliseconds(std::max<long long>(0, e[4].integer));
    answer.token_in = std::chrono::milliseconds(std::max<long long>(0, e[5].integer));
    if (answer.what == lease_answer::result::granted) {
        std::lock_guard lock(impl_->mutex);
        impl_->book.add(id, key, now);
        answer.lease = id;
    }
    co_return answer;
}

void fleet_client::release(const std::string& key, std::uint64_t lease) {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->book.remove(lease)) return;
    const host_keys k(key);
    impl_->eval(release_script(), {"1", k.leases, impl_->book.member(lease)},
                [this, key](boost::system::error_code ec, redis_reply r) {
                    if (!ec && r.type == redis_reply::kind::integer && impl_->cb.on_held)
                        impl_->cb.on_held(key, static_cast<std::size_t>(std::max<long long>(0, r.integer)));
                });
}

std::uint64_t fleet_client::hold_unasserted(const std::string& key) {
    std::lock_guard lock(impl_->mutex);
    const auto id = impl_->book.next_id();
    impl_->book.add(id, key, clock::now());
    return id;
}

void fleet_client::publish(const std::string& key, std::size_t limit, double rate, clock::duration pause) {
    const host_keys k(key);
    impl_->eval(publish_script(),
                {"1", k.state, std::to_string(limit), decimal(rate), ms(pause),
                 ms(std::max<clock::duration>(shared_state_ttl, cfg_.lease_ttl))},
                [](boost::system::error_code, redis_reply) {});
}

void fleet_client::withdraw(const std::string& key) {
    const host_keys k(key);
    impl_->eval(withdraw_script(), {"2", k.waiters, k.polled, impl_->tag_text}, [](boost::system::error_code, redis_reply) {});
}

}  // namespace politeproxy::fleet
