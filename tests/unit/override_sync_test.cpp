// Live overrides shared through a real redis-server: a put and a removal reach another
// process within a second, a late joiner reads what is still there, a store that lost
// everything (FLUSHALL, a restart) is given it again, and 100 changes page through the
// reply reader's 64-element bound. Every process runs on one io_context, run here in
// bounded steps.
#include "politeproxy/fleet/override_sync.hpp"

#include "politeproxy/base/log.hpp"
#include "redis_server.hpp"

#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

#include <map>
#include <optional>

using namespace politeproxy;
using namespace politeproxy::fleet;
using namespace std::chrono_literals;
using politeproxy::testing::redis_server;
using steady = std::chrono::steady_clock;

namespace {

fleet_config config_for(int port) {
    fleet_config c;
    c.nodes = {{"127.0.0.1", static_cast<std::uint16_t>(port)}};
    c.timeout = 500ms;
    return c;
}

// One proxy process: what it heard, and what it holds (its own puts) for known().
struct process {
    std::map<std::string, std::optional<std::string>> heard;  ///< the latest per host
    std::map<std::string, int> told;                          ///< on_change calls per host
    std::map<std::string, std::string> held;
    override_sync sync;

    process(boost::asio::io_context& ioc, int port, const logger& log)
        : sync(ioc, config_for(port), log,
               {[this](const std::string& key, std::optional<std::string> value) {
                    heard[key] = std::move(value);
                    ++told[key];
                },
                [this] {
                    std::vector<override_sync::entry> out;
                    for (const auto& [k, v] : held) out.push_back({k, v, std::nullopt});
                    return out;
                }}) {
        sync.start();
    }
    void put(const std::string& key, const std::string& value, std::optional<std::chrono::milliseconds> ttl = {}) {
        held[key] = value;
        sync.put(key, value, ttl);
    }
    bool has(const std::string& key, const std::string& value) const {
        auto it = heard.find(key);
        return it != heard.end() && it->second == value;
    }
    bool gone(const std::string& key) const {
        auto it = heard.find(key);
        return it != heard.end() && !it->second;
    }
};

// A string key's value in the store, or nothing.
std::optional<std::string> stored(redis_server& store, const std::string& key) {
    auto r = store.command({"GET", key});
    if (r->type != REDIS_REPLY_STRING) return std::nullopt;
    return std::string(r->str, r->len);
}

// Runs the loops until `done` or `limit` passes.
template <class F>
bool run_until(std::initializer_list<boost::asio::io_context*> loops, F&& done, steady::duration limit = 5s) {
    const auto deadline = steady::now() + limit;
    while (!done() && steady::now() < deadline)
        for (auto* l : loops) l->run_one_for(5ms);
    return done();
}
template <class F>
bool run_until(boost::asio::io_context& ioc, F&& done, steady::duration limit = 5s) {
    return run_until({&ioc}, std::forward<F>(done), limit);
}

}  // namespace

TEST_CASE("a put and a removal on A reach B within a second") {
    redis_server store;
    boost::asio::io_context ioc;
    logger log(log_level::error);
    process a(ioc, store.port(), log), b(ioc, store.port(), log);
    a.put("warm.example", R"({"limit":1})");  // both connected and polling
    REQUIRE(run_until(ioc, [&] { return b.has("warm.example", R"({"limit":1})"); }));

    steady::duration slowest{};
    for (int i = 0; i < 5; ++i) {
        const std::string value = R"({"limit":)" + std::to_string(i + 2) + "}";
        const auto t0 = steady::now();
        a.put("reach.example", value);
        REQUIRE(run_until(ioc, [&] { return b.has("reach.example", value); }));
        const auto took = steady::now() - t0;
        CHECK(took < 1s);
        slowest = std::max(slowest, took);
    }
    MESSAGE("slowest of 5 reaches: " << std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count() << " ms");

    const auto t0 = steady::now();
    a.sync.remove("reach.example");
    REQUIRE(run_until(ioc, [&] { return b.gone("reach.example"); }));
    CHECK(steady::now() - t0 < 1s);
    CHECK(run_until(ioc, [&] { return a.gone("reach.example"); }));  // its own change comes back too
    CHECK(store.command({"EXISTS", "pp:{pp:overrides}:override:reach.example"})->integer == 0);
}

TEST_CASE("a TTL: a process that joins before it ends reads the override, one after it does not") {
    redis_server store;
    boost::asio::io_context ioc;
    logger log(log_level::error);
    process a(ioc, store.port(), log);
    a.put("steady.example", "{}");
    const auto put_at = steady::now();
    a.put("brief.example", R"({"pause":"1s"})", 1s);
    process early(ioc, store.port(), log);
    REQUIRE(run_until(ioc, [&] { return early.has("brief.example", R"({"pause":"1s"})"); }));
    CHECK(steady::now() - put_at < 1s);  // else the test proves nothing

    run_until(ioc, [&] { return steady::now() - put_at > 1100ms; });
    process late(ioc, store.port(), log);
    // Both hosts are listed as changed: the late one hears the expired one as nullopt.
    REQUIRE(run_until(ioc, [&] { return late.heard.contains("brief.example") && late.heard.contains("steady.example"); }));
    CHECK(late.gone("brief.example"));
    CHECK(late.has("steady.example", "{}"));
    // The early one was not told of the expiry: the caller expires it itself.
    CHECK(early.has("brief.example", R"({"pause":"1s"})"));
}

TEST_CASE("a store that lost everything (FLUSHALL, a restart) is given A's overrides again") {
    std::optional<redis_server> store(std::in_place);
    const int port = store->port();
    boost::asio::io_context loop_a, loop_b;  // apart, so that B can be held still
    logger log(log_level::error);
    process a(loop_a, port, log), b(loop_b, port, log);  // b holds nothing: what it hears again is a's
    const std::vector<std::string> hosts{"one.example", "two.example", "three.example"};
    for (const auto& h : hosts) a.put(h, R"({"limit":3})");
    REQUIRE(run_until({&loop_a, &loop_b}, [&] { return a.has("three.example", R"({"limit":3})") && b.has("three.example", R"({"limit":3})"); }));
    auto told_again = [&](process& p, int before) {
        return [&p, before] { return p.told["three.example"] > before; };
    };

    // FLUSHALL while B stands still: A puts its three again, so the version is back to
    // what B read. Only the epoch the first re-publication stamped tells B of the loss.
    store->command({"FLUSHALL"});
    REQUIRE(run_until(loop_a, told_again(a, a.told["three.example"])));
    CHECK(stored(*store, "pp:{pp:overrides}:version") == "3");
    REQUIRE(run_until(loop_b, told_again(b, b.told["three.example"])));
    for (const auto& h : hosts) CHECK(b.has(h, R"({"limit":3})"));

    // A restart: the connections drop, come back to an empty store.
    const int before = b.told["three.example"];
    store.reset();  // SIGKILL
    store.emplace(port);
    REQUIRE(run_until({&loop_a, &loop_b}, told_again(b, before), 10s));
    for (const auto& h : hosts) {
        CHECK(b.has(h, R"({"limit":3})"));
        CHECK(stored(*store, "pp:{pp:overrides}:override:" + h) == R"({"limit":3})");
    }
}

TEST_CASE("100 changes page through in replies of 30, to a running process and to a late joiner") {
    redis_server store;
    boost::asio::io_context ioc;
    logger log(log_level::error);
    process a(ioc, store.port(), log), b(ioc, store.port(), log);
    auto all_heard = [](const process& p) {
        for (int i = 0; i < 100; ++i)
            if (!p.has("h" + std::to_string(i) + ".example", std::to_string(i))) return false;
        return true;
    };
    for (int i = 0; i < 100; ++i) a.put("h" + std::to_string(i) + ".example", std::to_string(i));
    CHECK(run_until(ioc, [&] { return all_heard(b); }));
    process late(ioc, store.port(), log);
    CHECK(run_until(ioc, [&] { return all_heard(late); }));
    CHECK(late.heard.size() == 100);
}

TEST_CASE("a change made while the store is away is sent when it is back, a removal too") {
    std::optional<redis_server> store(std::in_place);
    const int port = store->port();
    boost::asio::io_context ioc;
    logger log(log_level::error);
    process a(ioc, port, log), b(ioc, port, log);
    a.put("gone.example", "{}");
    REQUIRE(run_until(ioc, [&] { return b.has("gone.example", "{}"); }));
    store.reset();
    run_until(ioc, [] { return false; }, 300ms);  // both see the store go
    a.held.erase("gone.example");
    a.sync.remove("gone.example");                 // known() cannot carry a removal
    a.put("new.example", "{}");
    store.emplace(port);
    REQUIRE(run_until(ioc, [&] { return b.has("new.example", "{}") && b.gone("gone.example"); }, 10s));
}
