#include "politeproxy/server/proxy_server.hpp"
#include "politeproxy/tls/config_check.hpp"
#include "politeproxy/tls/session.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/free_heap.hpp"
#include "politeproxy/base/off_thread.hpp"

#include "politeproxy/admin/admin_server.hpp"
#include "politeproxy/admin/metrics_renderer.hpp"
#include "politeproxy/http2/server_session.hpp"
#include "politeproxy/server/client_session.hpp"
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/server/password_checks.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/host_table.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "politeproxy/exchange/live_overrides.hpp"
#include "politeproxy/fleet/fleet_client.hpp"
#include "politeproxy/fleet/override_sync.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/exchange/h2_origin_session.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/net/origin_pool.hpp"
#include "politeproxy/server/proxy_context.hpp"
#include "politeproxy/server/session_set.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <memory_resource>
#include <optional>
#include <stdexcept>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr auto housekeeping_period = std::chrono::seconds(1);
constexpr auto accept_error_pause = std::chrono::milliseconds(100);
constexpr auto drain_poll = std::chrono::milliseconds(50);
constexpr auto reload_read_timeout = std::chrono::seconds(60);  // a config on a hung file system
constexpr std::size_t release_heap_after = 1000;                 // evicted hosts in one pass

// The admin listener's threads for the answers it builds over every host (admin_view).
struct admin_thread_pools {
    asio::thread_pool metrics{1};
    asio::thread_pool views{1};
    void stop() {  // what was queued is dropped (its waiters' loops have stopped); what runs ends
        metrics.stop();
        views.stop();
        metrics.join();
        views.join();
    }
};

// A minted leaf certificate is valid this long (and minted again a quarter before).
constexpr auto leaf_lifetime = std::chrono::hours(24 * 30);

std::string make_via() {
    std::random_device rd;
    char id[16];
    std::snprintf(id, sizeof id, "%08x", static_cast<unsigned>(rd()));
    return std::string("1.1 politeproxy-") + id;
}

// The listeners as bound (a port 0 is a port now): never a destination. For one bound to
// 0.0.0.0 or ::, the host's own addresses too.
own_listeners own_listeners_of(std::initializer_list<tcp::endpoint> bound) {
    own_listeners own;
    bool any = false;
    for (const auto& e : bound) {
        const bool unspecified = e.address().is_unspecified();
        own.bound.push_back({bytes_of(e.address()), e.port(), unspecified});
        any = any || unspecified;
    }
    ::ifaddrs* list = nullptr;
    if (!any || ::getifaddrs(&list) != 0) return own;
    for (const ::ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr) continue;
        if (i->ifa_addr->sa_family == AF_INET) {
            const auto* in = reinterpret_cast<const ::sockaddr_in*>(i->ifa_addr);
            own.local.push_back(ipv4_bytes(ntohl(in->sin_addr.s_addr)));
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const auto* in6 = reinterpret_cast<const ::sockaddr_in6*>(i->ifa_addr);
            ip_bytes b;
            std::memcpy(b.data(), &in6->sin6_addr, b.size());
            own.local.push_back(b);
        }
    }
    ::freeifaddrs(list);
    return own;
}

tcp_acceptor bind(asio::io_context& ioc, const listen_address& where) {
    const tcp::endpoint endpoint(asio::ip::make_address(where.host), where.port);
    tcp_acceptor acceptor(ioc);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp_acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
    return acceptor;
}

std::string text_of(const tcp::endpoint& e) {
    return listen_address{e.address().to_string(), e.port()}.text();
}

// One event loop per thread, each with its own origin pool (a socket belongs to the
// loop it was opened on). A session lives on one worker from accept to close, so
// nothing on a worker needs a strand; what workers share (gates, metrics, sessions)
// locks for itself.
struct worker {
    origin_pool pool;                  // cleared by run() before the loop goes
    origin_sessions h2_origins;        // closed by run() before the loop goes
    std::pmr::unsynchronized_pool_resource field_blocks;  // for its sessions' field arenas
    std::optional<proxy_context> ctx;  // what this worker's sessions share
    asio::io_context ioc{1};           // run by exactly one thread; destroyed first
};

}  // namespace

proxy_server::proxy_server(std::string config_path, std::shared_ptr<const config> cfg, logger log)
    : config_path_(std::move(config_path)), cfg_(std::move(cfg)), log_(log) {}

int proxy_server::run() {
    const unsigned threads = cfg_->workers ? cfg_->workers : std::max(1u, std::thread::hardware_concurrency());

    // Declared before the workers: destroying a worker's io_context destroys suspended
    // sessions, whose permits and connection counters still refer to these.
    host_gates gates(cfg_);
    parent_set parents(gates.time());
    parents.update(*cfg_);
    std::vector<std::string_view> h2_guards;
    for (http2::guard g : http2::all_guards) h2_guards.emplace_back(http2::label(g));
    metrics m(h2_guards);
    metrics_renderer rendered;
    session_set sessions;
    std::atomic<bool> draining{false};
    std::atomic<std::size_t> open_clients{0};  // limits.max_client_connections
    // TLS for interception: the CA was checked when the config loaded; a reload keeps
    // these and the tls keys they were made from (see reload()).
    std::optional<tls::leaf_cache> leaves;
    std::unique_ptr<tls::server_side> intercept;
    std::unique_ptr<tls::client_side> origin_tls;
    if (cfg_->tls.mode == tls_config::mode_type::intercept) {
        auto ca = tls::certificate_authority::load(cfg_->tls.ca_cert, cfg_->tls.ca_key);
        if (!ca) throw std::runtime_error("tls: " + ca.error());
        leaves.emplace(std::move(*ca), cfg_->tls.leaf_cache, leaf_lifetime);
        intercept = std::make_unique<tls::server_side>(*leaves, cfg_->tls.alpn,
                                                       [&m](bool minted) { m.leaf_certificate(minted); });
        auto sides = tls::client_side::make(cfg_->tls.upstream_ca_file);
        if (!sides) throw std::runtime_error("tls: " + sides.error());
        origin_tls = std::move(*sides);
    }
    std::vector<std::unique_ptr<worker>> workers;
    for (unsigned i = 0; i < threads; ++i) workers.push_back(std::make_unique<worker>());
    dns_resolver resolver(cfg_->dns, m, log_);  // after the workers: its channels live on their loops
    for (auto& w : workers) resolver.add_loop(w->ioc);
    asio::thread_pool config_loader(1);  // SIGHUP's reads; the same
    password_checks passwords;             // the same
    const std::string via = make_via();
    for (auto& w : workers)
        w->ctx.emplace(proxy_context{{gates, w->pool, m, resolver, log_, origin_tls.get(), w->h2_origins, parents, via},
                                     draining, sessions, w->field_blocks, intercept.get(), passwords});
    // The fleet store, one connection per worker, reached before any listener opens: a
    // fleet that starts together never exceeds its bound. Destroyed before the workers
    // (its connections live on their loops), detached from the gates first.
    std::unique_ptr<fleet::fleet_client> fleet;
    if (cfg_->fleet) {
        fleet = std::make_unique<fleet::fleet_client>(
            *cfg_->fleet, m, log_,
            fleet::fleet_client::callbacks{
                [&gates](bool) { gates.fleet_store_changed(); },
                [&gates](const std::string& key, std::size_t held) { gates.fleet_held(key, held); }});
        for (auto& w : workers) fleet->add_lane(w->ioc);
        gates.attach_fleet(*fleet);
        if (!fleet->start())
            log_.write(log_level::warn, "fleet",
                       "store " + cfg_->fleet->redis + " did not answer within fleet.timeout: on_store_failure (" +
                           (cfg_->fleet->on_store_failure == fleet_config::failure_mode::fail_closed ? "fail_closed"
                                                                                                     : "local_share") +
                           ") applies until it does");
    }
    // The control API's overrides: kept in admin.state_file (written on the loader's
    // thread), shared through the fleet store (on the first worker's loop, like its lane).
    live_overrides overrides(gates, log_, cfg_->admin.state_file,
                             [&config_loader](std::function<void()> job) { asio::post(config_loader, std::move(job)); });
    overrides.load_state(std::chrono::system_clock::now());
    std::unique_ptr<fleet::override_sync> shared_overrides;
    if (cfg_->fleet) {
        using wall = std::chrono::system_clock;
        shared_overrides = std::make_unique<fleet::override_sync>(
            workers.front()->ioc, *cfg_->fleet, log_,
            fleet::override_sync::callbacks{
                [&overrides](const std::string& key, std::optional<std::string> value) {
                    overrides.heard(key, value, wall::now());
                },
                [&overrides] { return overrides.known(wall::now()); }});
        overrides.share_through(*shared_overrides);
        shared_overrides->start();
    }
    const auto stop_all = [&] {
        for (auto& w : workers) w->ioc.stop();
    };
    const auto idle_origin_connections = [&] {
        std::size_t n = 0;
        for (auto& w : workers) n += w->pool.idle_count();
        return n;
    };

    // Accepting, signals, the admin listener and shutdown run on the first worker.
    asio::io_context& control = workers.front()->ioc;
    tcp_acceptor proxy_acceptor = bind(control, cfg_->listen);
    tcp_acceptor admin_acceptor = bind(control, cfg_->admin_listen);
    {
        auto bound = std::make_shared<config>(*gates.current_config());
        bound->security.own = own_listeners_of({proxy_acceptor.local_endpoint(), admin_acceptor.local_endpoint()});
        gates.set_config(std::move(bound));
    }

    // The line tests and scripts wait for: both listeners are bound.
    std::fprintf(stderr, "politeproxy: listening proxy=%s admin=%s\n", text_of(proxy_acceptor.local_endpoint()).c_str(),
                 text_of(admin_acceptor.local_endpoint()).c_str());
    std::fflush(stderr);

    asio::co_spawn(control, [&]() -> task<void> {
        steady_timer pause(control);
        for (std::size_t next = 0;; next = (next + 1) % workers.size()) {
            worker& target = *workers[next];
            auto [ec, socket] = co_await proxy_acceptor.async_accept(target.ioc, use_tuple);
            if (draining) co_return;
            if (ec) {
                log_.write(log_level::warn, "accept", ec.message());
                pause.expires_after(accept_error_pause);  // e.g. out of file descriptors
                co_await pause.async_wait(use_tuple);
                continue;
            }
            // One client may open connections without end (and park 100 streams on each
            // HTTP/2 one): beyond the cap a new connection is closed at once.
            if (open_clients.load(std::memory_order_relaxed) >= gates.current_config()->limits.max_client_connections) {
                m.rejected(errc::client_connections_full);
                boost::system::error_code ignored;
                socket.close(ignored);
                continue;
            }
            open_clients.fetch_add(1, std::memory_order_relaxed);
            asio::co_spawn(target.ioc, run_client_session(*target.ctx, std::move(socket)),
                           [this, &open_clients](std::exception_ptr e) {
                               open_clients.fetch_sub(1, std::memory_order_relaxed);
                               if (!e) return;
                               // A bug, not a network event: log it loudly and keep
                               // serving everyone else. The session's permits were
                               // released by their destructors while it unwound.
                               try {
                                   std::rethrow_exception(e);
                               } catch (const std::exception& ex) {
                                   log_.write(log_level::error, "session", std::string("uncaught: ") + ex.what());
                               }
                           });
        }
    }, asio::detached);

    // Declared after everything the admin view refers to: gone (stopped, joined) before it.
    admin_thread_pools admin_threads;
    asio::co_spawn(control,
                   run_admin_listener(admin_acceptor,
                                      admin_view{gates, overrides, parents, m, rendered, idle_origin_connections, [&] { return !draining.load(); },
                                                 [&]() -> const char* {
                                                     if (!fleet) return nullptr;
                                                     return fleet->store_up() ? "up" : "down";
                                                 },
                                                 &resolver, &admin_threads.metrics, &admin_threads.views}),
                   asio::detached);

    // Each worker sweeps its own pool; the first also evicts idle gates.
    std::vector<std::unique_ptr<steady_timer>> housekeeping;
    for (auto& w : workers) {
        auto& timer = *housekeeping.emplace_back(std::make_unique<steady_timer>(w->ioc));
        const bool evicts = w == workers.front();
        asio::co_spawn(w->ioc, [&, evicts, pool = &w->pool, ex = w->ioc.get_executor()]() -> task<void> {
            host_table::pass_cursor eviction;  // a pass goes on from tick to tick
            std::size_t evicted = 0;           // by the pass so far
            for (;;) {
                timer.expires_after(housekeeping_period);
                if (auto [ec] = co_await timer.async_wait(use_tuple); ec) co_return;
                pool->sweep(clock::now());  // connection lifetimes are network time
                const auto now = gates.time().now();
                if (!evicts) continue;
                gates.tick(now);
                overrides.tick(std::chrono::system_clock::now());
                // In slices, the loop serving between them: a million idle hosts never stall
                // it long. A few shards a tick when the TTL is long (a pass in a tenth of it).
                const auto idle_for = gates.current_config()->limits.host_idle_ttl;
                if (eviction.done()) eviction = {};
                const std::size_t last_shard = eviction.shard + host_gates::eviction_shards_per_tick(idle_for, housekeeping_period);
                while (!eviction.done() && eviction.shard < last_shard) {
                    evicted += gates.evict_idle(
                        eviction, now, idle_for,
                        [&rendered](const std::string& key, const host_counts& final) { rendered.host_evicted(key, final); },
                        [&rendered](const std::string& name, const client_counts& final) {
                            rendered.client_evicted(name, final);
                        });
                    co_await asio::post(ex, asio::deferred);
                }
                if (!eviction.done()) continue;
                // Give freed gate memory back to the system, not only to the heap, after a
                // pass that freed much: on the loader's thread, as returning one large free
                // span can take 20 ms (a few evictions a second are left to the allocator).
                // A chunk of entries went as its last entry did; the free pages of chunks
                // that a few hosts still hold go here (base/block_arena.hpp).
                if (evicted >= release_heap_after)
                    asio::post(config_loader, [] {
                        host_entry_blocks().release_free_pages();
                        release_free_heap();
                    });
                evicted = 0;
            }
        }, asio::detached);
    }

    // The file, the users file, the CA and the suffix list are read on a thread of their
    // own: worker 0 serves requests meanwhile, and what fails to load fails the reload.
    asio::signal_set reload_signal(control, SIGHUP);
    asio::co_spawn(control, [&]() -> task<void> {
        for (;;) {
            auto [ec, signo] = co_await reload_signal.async_wait(use_tuple);
            if (ec) co_return;
            auto read = [path = config_path_] { return tls::load_config_checked(path); };
            auto loaded = co_await off_thread(config_loader, std::move(read), clock::now() + reload_read_timeout);
            if (!loaded) loaded.emplace(boost::system::in_place_error, config_path_ + ": not read within " +
                                                                           std::to_string(reload_read_timeout.count()) + " s");
            if (!apply_reload(gates, parents, m, std::move(*loaded))) continue;
            // The tracked hosts take their new limits in slices, the loop serving between them.
            for (host_table::pass_cursor at; !at.done();) {
                gates.reapply_config(at);
                co_await asio::post(control, asio::deferred);
            }
            m.config_reload(true);
            log_.write(log_level::info, "config", "reloaded " + config_path_ + " (listen, admin_listen, workers, fleet, dns "
                                                  "and tls other than tls.intercept_exclude apply at restart)");
        }
    }, asio::detached);

    asio::signal_set stop_signals(control, SIGINT, SIGTERM);
    asio::co_spawn(control, [&]() -> task<void> {
        auto [ec, signo] = co_await stop_signals.async_wait(use_tuple);
        if (ec) co_return;
        log_.write(log_level::info, "server", "signal " + std::to_string(signo) + ": draining");
        stop_signals.async_wait([&](boost::system::error_code e, int) {
            if (e) return;
            log_.write(log_level::warn, "server", "second signal: stopping now");
            stop_all();
        });
        // Stop taking work, answer what is parked, close idle connections; requests in
        // flight finish, up to drain_timeout.
        draining = true;
        boost::system::error_code ignored;
        proxy_acceptor.close(ignored);
        gates.close();
        sessions.close_idle();
        steady_timer drain(control);
        const auto deadline = clock::now() + gates.current_config()->drain_timeout;
        while (sessions.size() > 0 && clock::now() < deadline) {
            drain.expires_after(drain_poll);
            co_await drain.async_wait(use_tuple);
        }
        if (sessions.size() > 0)
            log_.write(log_level::warn, "server", std::to_string(sessions.size()) + " sessions cut at drain_timeout");
        if (fleet) {  // the last leases given back linger for a carrier: let them reach the store
            drain.expires_after(fleet::fleet_client::release_linger * 10);
            co_await drain.async_wait(use_tuple);
        }
        admin_acceptor.close(ignored);
        stop_all();
    }, asio::detached);

    std::vector<std::thread> worker_threads;
    for (std::size_t i = 1; i < workers.size(); ++i)
        worker_threads.emplace_back([&ioc = workers[i]->ioc] { ioc.run(); });
    control.run();
    for (auto& t : worker_threads) t.join();
    admin_threads.stop();  // an answer still being built there refers to what goes next
    // The pools' sockets and the timers belong to the workers' loops, which go first.
    for (auto& w : workers) {
        w->pool.clear();
        w->h2_origins.close_all();
    }
    housekeeping.clear();
    if (shared_overrides) shared_overrides->stop();
    overrides.flush();
    if (fleet) {  // what still waits for the store fails now, on the workers' (stopped) loops
        gates.detach_fleet();
        fleet->stop();
        fleet.reset();
    }
    log_.write(log_level::info, "server", "stopped");
    return 0;
}

bool proxy_server::apply_reload(host_gates& gates, parent_set& parents, metrics& m, loaded<config> loaded) {
    if (!loaded) {
        m.config_reload(false);
        log_.write(log_level::error, "config", "reload rejected, keeping the running config: " + loaded.error());
        return false;
    }
    // Addresses, threads and TLS (the CA, the origin trust store, the leaf cache were made
    // from them at start) stay as they run; the rest applies now, tls.intercept_exclude too.
    const auto running = gates.current_config();
    loaded->listen = running->listen;
    loaded->admin_listen = running->admin_listen;
    loaded->workers = running->workers;
    loaded->security.own = running->security.own;
    if (const auto open = open_proxy_error(*loaded)) {
        m.config_reload(false);
        log_.write(log_level::error, "config", "reload rejected, keeping the running config: " + *open);
        return false;
    }
    if (loaded->fleet != running->fleet)
        log_.write(log_level::warn, "config", "fleet changed: that applies at restart, the running fleet settings stay until then");
    loaded->fleet = running->fleet;
    if (loaded->admin.state_file != running->admin.state_file)
        log_.write(log_level::warn, "config", "admin.state_file changed: that applies at restart");
    loaded->admin.state_file = running->admin.state_file;
    tls_config tls = running->tls;
    tls.intercept_exclude = loaded->tls.intercept_exclude;
    const bool tls_waits = tls != loaded->tls;
    loaded->tls = std::move(tls);
    parents.update(*loaded);  // requests in flight keep the parents they hold
    gates.begin_config(std::make_shared<const config>(std::move(*loaded)));  // the caller reapplies it to the hosts
    if (tls_waits)
        log_.write(log_level::warn, "config", "tls changed beyond tls.intercept_exclude: that applies at restart, "
                                              "the running tls settings stay until then");
    return true;
}

}  // namespace politeproxy
