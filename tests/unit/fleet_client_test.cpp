// The fleet client against a real redis-server: start-up, pipelined acquires, release,
// the EVALSHA -> NOSCRIPT -> EVAL fallback, and a store that goes away (also under
// host_gates, before their sweep has heard of it).
#include "politeproxy/fleet/fleet_client.hpp"

#include "politeproxy/admin/metrics_renderer.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/parent_set.hpp"
#include "redis_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <doctest/doctest.h>

#include <atomic>

using namespace politeproxy;
using namespace politeproxy::fleet;
using namespace std::chrono_literals;
using politeproxy::testing::redis_server;

namespace {

// Leases held, unexpired.
long long held(redis_server& store, const std::string& key) {
    return store.command({"ZCOUNT", key, "1", "+inf"})->integer;
}

fleet_config config_for(int port) {
    fleet_config c;
    c.nodes = {{"127.0.0.1", static_cast<std::uint16_t>(port)}};
    c.lease_ttl = 3s;
    c.timeout = 500ms;
    return c;
}

// A worker: one loop with one lane of the client, run on its own thread after start().
struct worker {
    boost::asio::io_context ioc{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{ioc.get_executor()};
    std::thread thread;

    void run() {
        thread = std::thread([this] { ioc.run(); });
    }
    ~worker() {
        ioc.stop();
        if (thread.joinable()) thread.join();
    }
};

// One acquire on the worker's loop, waited for here.
lease_answer acquire_now(worker& w, fleet_client& f, const std::string& key, std::size_t limit) {
    return boost::asio::co_spawn(w.ioc, f.acquire(key, lease_terms{limit, 1000, 1000}), boost::asio::use_future).get();
}

template <class F>
bool eventually(F&& f) {
    for (int i = 0; i < 300; ++i) {
        if (f()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

}  // namespace

TEST_CASE("acquire, release, and the NOSCRIPT fallback after the store lost its scripts") {
    redis_server store;
    metrics m;
    logger log(log_level::error);
    worker w;
    fleet_client f(config_for(store.port()), m, log, {});
    f.add_lane(w.ioc);
    REQUIRE(f.start());
    CHECK(f.store_up());
    w.run();

    const auto a = acquire_now(w, f, "client.example", 1);
    REQUIRE(a.what == lease_answer::result::granted);
    CHECK(a.held == 1);
    CHECK(acquire_now(w, f, "client.example", 1).what == lease_answer::result::refused);
    f.release("client.example", a.lease);
    CHECK(eventually([&] { return held(store, "pp:{client.example}:leases") == 0; }));

    store.command({"SCRIPT", "FLUSH"});
    const auto b = acquire_now(w, f, "client.example", 1);
    CHECK(b.what == lease_answer::result::granted);  // EVALSHA failed with NOSCRIPT; EVAL went
    f.release("client.example", b.lease);
    CHECK(eventually([&] { return held(store, "pp:{client.example}:leases") == 0; }));
    w.ioc.stop();
    w.thread.join();
    f.stop();
}

TEST_CASE("a store that is not there: start() gives up after the timeout, acquires say store_down") {
    const int port = politeproxy::testing::free_loopback_port();
    metrics m;
    logger log(log_level::error);
    worker w;
    fleet_client f(config_for(port), m, log, {});
    f.add_lane(w.ioc);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(f.start());
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    w.run();
    CHECK(acquire_now(w, f, "none.example", 1).what == lease_answer::result::store_down);
    w.ioc.stop();
    w.thread.join();
    f.stop();
}

TEST_CASE("the store going away is noticed and reported; leases held are re-asserted when it is back") {
    std::atomic<int> ups{0}, downs{0};
    metrics m;
    logger log(log_level::error);
    std::optional<redis_server> store(std::in_place);
    const int port = store->port();
    worker w;
    fleet_client f(config_for(port), m, log, {[&](bool up) { (up ? ups : downs)++; }, nullptr});
    f.add_lane(w.ioc);
    REQUIRE(f.start());
    w.run();
    const auto a = acquire_now(w, f, "back.example", 2);
    REQUIRE(a.what == lease_answer::result::granted);
    store.reset();  // SIGKILL
    CHECK(eventually([&] { return downs.load() == 1; }));
    CHECK_FALSE(f.store_up());
    CHECK(acquire_now(w, f, "back.example", 2).what == lease_answer::result::store_down);
    // A request that went under local_share (on the worker, as host_gates does it).
    boost::asio::post(w.ioc, boost::asio::use_future([&] { (void)f.hold_unasserted("back.example"); })).get();
    store.emplace(port);                        // back, empty, on the same port
    CHECK(eventually([&] { return ups.load() == 2; }));
    // Both running requests hold their leases again: the one granted before the outage
    // and the one that departed during it.
    CHECK(eventually([&] { return held(*store, "pp:{back.example}:leases") == 2; }));
    // The store had lost both: fleet_lease_lost_total counts them.
    const host_gates gates(std::make_shared<const config>());
    metrics_renderer rendered;
    CHECK(eventually([&] {
        return rendered.render(m, gates, parent_set(gates.time()), 0).find("politeproxy_fleet_lease_lost_total 2") != std::string::npos;
    }));
    w.ioc.stop();
    w.thread.join();
    f.stop();
}

TEST_CASE("a store lost before host_gates' sweep: a release wakes no waiter past the local share") {
    metrics m;
    logger log(log_level::error);
    std::optional<redis_server> store(std::in_place);
    auto fleet_cfg = config_for(store->port());
    fleet_cfg.expected_workers = 2;  // a limit of 4: a local share of 2
    worker w;
    // The store's news never reaches the gates here (no fleet_store_changed): the window
    // between a loss and the sweep, held open.
    fleet_client f(fleet_cfg, m, log, {});
    f.add_lane(w.ioc);
    REQUIRE(f.start());
    w.run();
    auto cfg = load_config_text("defaults: { concurrency: 4, rate: 100000, burst: 100000 }\n", "test.yaml");
    REQUIRE(cfg.has_value());
    host_gates gates(std::make_shared<const config>(std::move(*cfg)));
    gates.attach_fleet(f);
    const std::string key = "share.example";
    auto acquire = [&] { return boost::asio::co_spawn(w.ioc, gates.acquire(key), boost::asio::use_future); };
    auto host = [&] { return gates.snapshot({key}, gates.time().now()).at(0); };

    std::vector<permit> running;
    for (int i = 0; i < 4; ++i) {
        auto r = acquire().get();
        REQUIRE(r.granted);
        running.push_back(std::move(r.granted));
    }
    auto fifth = acquire();  // parks at the host's gate: its 4 slots are held
    REQUIRE(eventually([&] { return host().waiting == 1; }));
    CHECK(held(*store, "pp:{share.example}:leases") == 4);

    store.reset();  // SIGKILL
    REQUIRE(eventually([&] { return !f.up_for(key); }));
    CHECK(host().limit == 4);  // nothing has run this host's gate since
    running.pop_back();        // a request ends: 3 still run
    // Its release ran the gate under the share (2), not the fleet's 4: the fifth waits.
    CHECK(host().limit == 2);
    CHECK(host().in_flight == 3);
    CHECK(host().waiting == 1);
    running.pop_back();
    running.pop_back();  // 1 runs: the fifth goes, under the share
    REQUIRE(fifth.wait_for(5s) == std::future_status::ready);
    {
        auto r = fifth.get();
        CHECK_FALSE(r.ec);
        CHECK(r.granted);
        CHECK(host().in_flight == 2);
    }
    running.clear();
    w.ioc.stop();
    w.thread.join();
    f.stop();
}

namespace {

// How many times the store ran `command` since the last CONFIG RESETSTAT.
long long calls(redis_server& store, const std::string& command) {
    const auto r = store.command({"INFO", "commandstats"});
    const std::string text(r->str, r->len);
    const auto at = text.find("cmdstat_" + command + ":calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + command.size() + 15));
}

// A client with one lane on a running worker, started against `store`, whose command
// counts are then reset.
struct started_client {
    explicit started_client(redis_server& store) : f(config_for(store.port()), m, log, {}) {
        f.add_lane(w.ioc);
        REQUIRE(f.start());
        w.run();
        store.command({"CONFIG", "RESETSTAT"});
    }
    ~started_client() {
        w.ioc.stop();
        if (w.thread.joinable()) w.thread.join();
        f.stop();
    }
    metrics m;
    logger log{log_level::error};
    worker w;
    fleet_client f;
};

}  // namespace

TEST_CASE("one host's acquires of one loop turn go in one command; a release rides on the host's next acquire") {
    redis_server store;
    started_client client(store);
    auto& w = client.w;
    auto& f = client.f;

    // Three requests of one host in one turn of the worker's loop, limit 2.
    auto three = boost::asio::post(w.ioc, boost::asio::use_future([&] {
        std::vector<std::future<lease_answer>> out;
        for (int i = 0; i < 3; ++i)
            out.push_back(boost::asio::co_spawn(w.ioc, f.acquire("batch.example", lease_terms{2, 1000, 1000}),
                                                boost::asio::use_future));
        return out;
    })).get();
    std::vector<lease_answer> answers;
    for (auto& a : three) answers.push_back(a.get());
    CHECK(answers[0].what == lease_answer::result::granted);
    CHECK(answers[1].what == lease_answer::result::granted);
    CHECK(answers[2].what == lease_answer::result::refused);  // the bound holds within a batch
    CHECK(calls(store, "evalsha") == 1);

    // A lease given back and the host's next acquire: one command for both.
    auto next = boost::asio::post(w.ioc, boost::asio::use_future([&] {
        f.release("batch.example", answers[0].lease);
        return boost::asio::co_spawn(w.ioc, f.acquire("batch.example", lease_terms{2, 1000, 1000}), boost::asio::use_future);
    })).get().get();
    CHECK(next.what == lease_answer::result::granted);
    CHECK(calls(store, "evalsha") == 2);
    CHECK(held(store, "pp:{batch.example}:leases") == 2);

    // Given back with no acquire to carry them: after the linger, one command for both.
    boost::asio::post(w.ioc, boost::asio::use_future([&] {
        f.release("batch.example", answers[1].lease);
        f.release("batch.example", next.lease);
    })).get();
    CHECK(eventually([&] { return held(store, "pp:{batch.example}:leases") == 0; }));
    CHECK(calls(store, "evalsha") == 3);
}

TEST_CASE("a busy host's lease is handed on without a round trip; the tokens not spent go back to the bucket") {
    redis_server store;
    started_client client(store);
    auto& w = client.w;
    auto& f = client.f;
    const std::string state = "pp:{chain.example}:state";
    auto tat = [&] { return std::stod(store.command({"HGET", state, "tat"})->str); };
    // rate 10/s (a token: 100 ms of the bucket), burst 20; two requests under way here.
    const lease_terms busy{5, 10, 20, 2};
    auto acquire = [&](lease_terms terms, const std::string& key = "chain.example") {
        return boost::asio::co_spawn(w.ioc, f.acquire(key, terms), boost::asio::use_future).get();
    };
    // Given back and asked for again on the loop, as host_gates does when a request ends
    // and the next one of the host departs.
    auto release_and_acquire = [&](std::uint64_t lease, lease_terms terms, const std::string& key = "chain.example") {
        return boost::asio::post(w.ioc, boost::asio::use_future([&] {
            f.release(key, lease);
            return boost::asio::co_spawn(w.ioc, f.acquire(key, terms), boost::asio::use_future);
        })).get().get();
    };

    const auto first = acquire(busy);
    REQUIRE(first.what == lease_answer::result::granted);
    CHECK(calls(store, "evalsha") == 1);
    const double after_grant = tat();  // the lease's token and its 8 spares
    // Eight handovers: the same lease, no command, one slot held in the store throughout.
    std::uint64_t lease = first.lease;
    for (std::size_t i = 0; i < fleet_client::handover_spares; ++i) {
        const auto next = release_and_acquire(lease, busy);
        REQUIRE(next.what == lease_answer::result::granted);
        CHECK(next.lease == lease);
        CHECK(held(store, "pp:{chain.example}:leases") == 1);
    }
    CHECK(calls(store, "evalsha") == 1);
    // Its spares spent, the next request asks the store (carrying the lease back).
    const auto ninth = release_and_acquire(lease, busy);
    REQUIRE(ninth.what == lease_answer::result::granted);
    CHECK(ninth.lease != lease);
    CHECK(calls(store, "evalsha") == 2);
    CHECK(held(store, "pp:{chain.example}:leases") == 1);

    // One handover, then no request: the lease goes back after the linger with its 7
    // unspent tokens, 700 ms of the bucket's time.
    const double before = tat();
    const auto tenth = release_and_acquire(ninth.lease, busy);
    CHECK(tenth.lease == ninth.lease);
    boost::asio::post(w.ioc, boost::asio::use_future([&] { f.release("chain.example", tenth.lease); })).get();
    CHECK(eventually([&] { return held(store, "pp:{chain.example}:leases") == 0; }));
    CHECK(tat() == doctest::Approx(before - 700).epsilon(1e-9));
    CHECK(before - after_grant == doctest::Approx(900));  // the ninth's token and its 8 spares

    // A lease older than handover_life is not handed on.
    const auto old = acquire(busy);
    REQUIRE(old.what == lease_answer::result::granted);
    std::this_thread::sleep_for(fleet_client::handover_life + 5ms);
    const auto calls_before = calls(store, "evalsha");
    CHECK(release_and_acquire(old.lease, busy).lease != old.lease);
    CHECK(calls(store, "evalsha") == calls_before + 1);

    // A quiet host (this request alone here) takes no spares: every lease from the store.
    const lease_terms quiet{5, 10, 20, 1};
    const auto q = acquire(quiet, "quiet.example");
    REQUIRE(q.what == lease_answer::result::granted);
    const auto q_calls = calls(store, "evalsha");
    const auto q2 = release_and_acquire(q.lease, quiet, "quiet.example");
    REQUIRE(q2.what == lease_answer::result::granted);
    CHECK(q2.lease != q.lease);
    CHECK(calls(store, "evalsha") == q_calls + 1);
}
