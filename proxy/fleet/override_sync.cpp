#include "politeproxy/fleet/override_sync.hpp"

#include "politeproxy/base/executor.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/fleet/cluster_slots.hpp"
#include "politeproxy/fleet/redis_store.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>

namespace politeproxy::fleet {
namespace asio = boost::asio;

namespace {

// A change reaches the fleet within this plus a round trip; one small MGET per process
// each period costs the store next to nothing.
constexpr auto poll_period = std::chrono::milliseconds(250);
// Changes read per round trip: two elements each (host, version) stay under the reply
// reader's bound of 64.
constexpr std::size_t page_size = 30;
// Changes kept while the store is unreachable, one per host: far more hosts than an
// operator overrides by hand, and a bound on what a stuck store can cost.
constexpr std::size_t most_unsent = 10'000;

// Every key shares the hash tag {pp:overrides}: the script touches four keys, which
// under Redis Cluster must share one slot (overrides are few: one node holds them all).
constexpr const char* version_key = "pp:{pp:overrides}:version";  // INCR per change
constexpr const char* changes_key = "pp:{pp:overrides}:changes";  // sorted set: host -> its last change's version
constexpr const char* epoch_key = "pp:{pp:overrides}:epoch";      // stamped by the first change into an empty store
std::string value_key(std::string_view host) { return "pp:{pp:overrides}:override:" + std::string(host); }
const std::uint16_t overrides_slot = key_slot(version_key);

// KEYS: version, changes, value, epoch. ARGV: host, then value and TTL ms (0: none) for a
// put, nothing more for a removal. Sent with EVAL, not EVALSHA: a NOSCRIPT answer re-sent
// as EVAL could land after a later change of the same host that another process's EVAL
// had made loadable, and the older value would win. Changes are rare; the body is small.
constexpr const char* change_script = R"lua(
local v = redis.call('INCR', KEYS[1])
if redis.call('EXISTS', KEYS[4]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[4], t[1] .. '.' .. t[2])
end
if not ARGV[2] then
  redis.call('DEL', KEYS[3])
elseif ARGV[3] == '0' then
  redis.call('SET', KEYS[3], ARGV[2])
else
  redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
end
redis.call('ZADD', KEYS[2], v, ARGV[1])
return v
)lua";

// A version as the store sends it (a bulk string, or a score); 0 when missing or garbled.
long long version_of(const redis_reply& r) {
    if (r.type == redis_reply::kind::integer) return r.integer;
    long long v = 0;
    if (std::from_chars(r.text.data(), r.text.data() + r.text.size(), v).ec != std::errc{}) return 0;
    return v;
}

}  // namespace

struct override_sync::impl {
    // A change the store has not taken yet.
    struct unsent {
        std::optional<std::string> value;  ///< nullopt: a removal
        std::optional<clock::time_point> expires;
    };

    impl(asio::io_context& ioc, const fleet_config& cfg, const logger& log, callbacks cb)
        : ioc(ioc),
          log(log),
          cb(std::move(cb)),
          store(make_redis_store(ioc, cfg, log, {},
                                 [this](bool came_up) {
                                     if (came_up && store->up_for(overrides_slot)) send_unsent();
                                 })),
          tick(ioc.get_executor()) {}

    // From any thread: the connection posts the command to its own; the answer (and the
    // bookkeeping of a failure) comes back there.
    void send_change(const std::string& host, std::optional<std::string> value, std::optional<clock::time_point> expires) {
        std::string ttl = "0";
        if (value && expires) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(*expires - clock::now()).count();
            if (left > 0) ttl = std::to_string(left);
            else value.reset();  // expired before the store heard of it: it replaced any older value, so gone
        }
        const std::string vkey = value_key(host);
        std::vector<std::string_view> args{"EVAL", change_script, "4", version_key, changes_key, vkey, epoch_key, host};
        if (value) args.insert(args.end(), {*value, ttl});
        store->send(overrides_slot, redis_command(args), [this, host, value, expires](boost::system::error_code ec, redis_reply r) mutable {
            // Replies come in the order sent: a change taken supersedes an earlier one kept.
            if (!ec && !r.is_error()) return void(unsent_changes.erase(host));
            if (!ec) log.write(log_level::error, "overrides", "the store refused a change of " + host + ": " + r.text);
            keep(host, {std::move(value), expires});
        });
    }

    // Failures come back in the order the changes were sent (the connection fails them in
    // order), so the one kept for a host is its latest not taken.
    void keep(const std::string& host, unsent change) {
        if (unsent_changes.size() >= most_unsent && !unsent_changes.contains(host)) {
            log.write(log_level::error, "overrides", "too many changes wait for the store: " + host + "'s is dropped");
            return;
        }
        unsent_changes[host] = std::move(change);
    }

    // On (re)connection, before anything else is queued: the store takes the waiting
    // changes ahead of any later one.
    void send_unsent() {
        auto waiting = std::exchange(unsent_changes, {});
        for (auto& [host, change] : waiting) send_change(host, std::move(change.value), change.expires);
    }

    // Sends `commands` back to back (one write) and completes, on this loop and never
    // inline, with their replies or the first error.
    template <class Token>
    auto pipeline(std::vector<std::string> commands, Token&& token) {
        return asio::async_initiate<Token, void(boost::system::error_code, std::vector<redis_reply>)>(
            [this](auto done, std::vector<std::string> commands) {
                auto replies = std::make_shared<std::vector<redis_reply>>(commands.size());
                auto failed = std::make_shared<boost::system::error_code>();
                auto keep_reply = [replies, failed](std::size_t i, boost::system::error_code ec, redis_reply r) {
                    if (ec && !*failed) *failed = ec;
                    (*replies)[i] = std::move(r);
                };
                const std::size_t last = commands.size() - 1;
                for (std::size_t i = 0; i < last; ++i)
                    store->send(overrides_slot, std::move(commands[i]), [keep_reply, i](boost::system::error_code ec, redis_reply r) { keep_reply(i, ec, std::move(r)); });
                // Replies (and failures) come in order: the last one completes the batch.
                auto ex = asio::get_associated_executor(done, ioc.get_executor());
                store->send(overrides_slot, std::move(commands[last]), [keep_reply, last, replies, failed, ex, done = std::move(done)](
                                                         boost::system::error_code ec, redis_reply r) mutable {
                    keep_reply(last, ec, std::move(r));
                    asio::post(ex, [done = std::move(done), replies, failed]() mutable { std::move(done)(*failed, std::move(*replies)); });
                });
            },
            token, std::move(commands));
    }

    task<void> poll_loop() {
        for (;;) {
            tick.expires_after(poll_period);
            if (auto [ec] = co_await tick.async_wait(use_tuple); ec || stopped) co_return;
            if (store->up_for(overrides_slot)) co_await poll();
        }
    }

    task<void> poll() {
        // Twice at most: a store that lost the overrides is given them again, then read
        // from the start (with the epoch forgotten, a second loss is not seen in this round).
        for (;;) {
            // Commands built apart: GCC 12 cannot keep an initializer list's array across a co_await.
            std::vector<std::string> mget{redis_command({"MGET", version_key, epoch_key})};
            auto [ec, head] = co_await pipeline(std::move(mget), use_tuple);
            if (ec || head[0].type != redis_reply::kind::array || head[0].elements.size() != 2 || stopped) co_return;
            const long long version = version_of(head[0].elements[0]);
            const std::string epoch = head[0].elements[1].text;
            // An empty epoch read last: the store held nothing to lose.
            if (!seen_epoch.empty() && (epoch != seen_epoch || version < seen)) {
                log.write(log_level::warn, "overrides", "the store lost the overrides (restarted or flushed): putting this process's again");
                // Queued ahead of the next read on this connection, so that read sees them.
                if (cb.known)
                    for (auto& e : cb.known())
                        send_change(e.key, std::move(e.value), e.ttl ? std::optional(clock::now() + *e.ttl) : std::nullopt);
                seen = 0;
                seen_epoch.clear();
                continue;
            }
            if (version > seen && !co_await read_changes()) co_return;
            // Past `version` even when the changes were lost apart from it: not re-read each round.
            seen = std::max(seen, version);
            seen_epoch = epoch;
            co_return;
        }
    }

    // Pages through the hosts changed after `seen`, telling each; false when the store
    // went away midway (the next round goes on from the last page told).
    task<bool> read_changes() {
        for (;;) {
            std::vector<std::string> range{redis_command({"ZRANGEBYSCORE", changes_key, "(" + std::to_string(seen), "+inf",
                                                          "WITHSCORES", "LIMIT", "0", std::to_string(page_size)})};
            auto [ec, page] = co_await pipeline(std::move(range), use_tuple);
            if (ec || page[0].type != redis_reply::kind::array || stopped) co_return false;
            const auto& found = page[0].elements;  // host, version, host, version...
            if (found.size() < 2) co_return true;
            std::vector<std::string> gets;
            for (std::size_t i = 0; i + 1 < found.size(); i += 2) gets.push_back(redis_command({"GET", value_key(found[i].text)}));
            auto [gec, values] = co_await pipeline(std::move(gets), use_tuple);
            if (gec || stopped) co_return false;
            // A value read now may be newer than the version listed: told again at its own.
            for (std::size_t i = 0; i < values.size(); ++i)
                cb.on_change(found[2 * i].text, values[i].type == redis_reply::kind::string ? std::optional(std::move(values[i].text))
                                                                                          : std::nullopt);
            const long long last = version_of(found[found.size() - 1]);
            if (last <= seen) co_return true;  // a garbled score: no progress to page on
            seen = last;
            if (found.size() < 2 * page_size) co_return true;
        }
    }

    asio::io_context& ioc;
    const logger& log;
    callbacks cb;
    std::unique_ptr<redis_store> store;
    steady_timer tick;
    bool started = false;
    bool stopped = false;
    // On the loop's thread:
    long long seen = 0;        ///< the version read up to
    std::string seen_epoch;    ///< the store's epoch when it was read
    std::map<std::string, unsent> unsent_changes;
};

override_sync::override_sync(asio::io_context& ioc, const fleet_config& cfg, const logger& log, callbacks cb)
    : impl_(std::make_unique<impl>(ioc, cfg, log, std::move(cb))) {}

override_sync::~override_sync() { stop(); }

void override_sync::start() {
    impl_->started = true;
    impl_->store->start();
    asio::co_spawn(impl_->ioc, impl_->poll_loop(), asio::detached);
}

void override_sync::stop() {
    if (!impl_->started || impl_->stopped) return;
    impl_->stopped = true;
    impl_->tick.cancel();
    impl_->store->close_now();
}

void override_sync::put(const std::string& key, const std::string& value, std::optional<std::chrono::milliseconds> ttl) {
    if (ttl && *ttl <= std::chrono::milliseconds::zero()) return remove(key);
    impl_->send_change(key, value, ttl ? std::optional(clock::now() + *ttl) : std::nullopt);
}

void override_sync::remove(const std::string& key) { impl_->send_change(key, std::nullopt, std::nullopt); }

}  // namespace politeproxy::fleet
