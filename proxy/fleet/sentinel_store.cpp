// redis_store for Redis Sentinel: the master the Sentinels name, followed on failover.
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/fleet/redis_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <atomic>
#include <charconv>

namespace politeproxy::fleet {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr auto ask_period = 250ms;
constexpr auto master_patience = 2s;  // then another Sentinel is asked (this one's master may be stale)
constexpr const char* switch_channel = "+switch-master";

std::optional<std::uint16_t> port_of(std::string_view text) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(value);
}

class sentinel_store final : public redis_store {
public:
    sentinel_store(asio::io_context& ioc, const fleet_config& cfg, const logger& log, std::vector<std::string> setup,
                   std::function<void(bool)> on_state)
        : ioc_(ioc),
          cfg_(cfg),
          log_(log),
          on_state_(std::move(on_state)),
          master_(ioc, redis_target{"", 0, cfg.password, cfg.db}, cfg.timeout, log, std::move(setup),
                  [this](bool up) { master_state(up); }),
          query_(ioc, sentinel(0), cfg.timeout, log, {}, [](bool) {}),
          watch_(ioc, sentinel(0), cfg.timeout, log, {redis_command({"SUBSCRIBE", switch_channel})}, [](bool) {}),
          ask_timer_(ioc.get_executor()) {
        watch_.on_push([this](const redis_reply& r) { on_switch(r); });
    }

    void start() override {
        query_.start();
        watch_.start();
        asio::co_spawn(ioc_, ask_loop(), asio::detached);
    }

    void close_now() override {
        stopped_ = true;
        role_ok_.store(false, std::memory_order_release);
        ask_timer_.cancel();
        query_.close_now();
        watch_.close_now();
        master_.close_now();
    }

    bool up() const override { return role_ok_.load(std::memory_order_acquire) && master_.up(); }
    bool up_for(std::uint16_t) const override { return up(); }

    void send(std::uint16_t, std::string command, handler done) override {
        master_.send(std::move(command), [this, done = std::move(done)](boost::system::error_code ec, redis_reply r) mutable {
            // A replica (a demoted master the Sentinels have not announced yet) refuses writes.
            if (!ec && r.is_error() && r.text.starts_with("READONLY")) {
                lost_master("answered READONLY");
                return done(errc::fleet_unavailable, {});
            }
            done(ec, std::move(r));
        });
    }

private:
    redis_target sentinel(std::size_t i) const { return {cfg_.nodes[i].host, cfg_.nodes[i].port, "", 0}; }

    void master_state(bool up) {
        if (!up) {
            const bool was = role_ok_.exchange(false, std::memory_order_acq_rel);
            ask_soon_ = true;
            if (was && on_state_) on_state_(false);
            return;
        }
        check_role();
    }

    // Connected: a master only if it says so (a restarted old master comes back a replica).
    void check_role() {
        master_.send(redis_command({"ROLE"}), [this](boost::system::error_code ec, redis_reply r) {
            if (ec) return;
            const bool master = r.type == redis_reply::kind::array && !r.elements.empty() && r.elements[0].text == "master";
            if (!master) return lost_master("is not a master");
            if (!role_ok_.exchange(true, std::memory_order_acq_rel)) {
                log_.write(log_level::info, "fleet",
                           "master " + cfg_.master_name + " at " + target_.host + ":" + std::to_string(target_.port) + " up");
                if (on_state_) on_state_(true);
            }
        });
    }

    // The master in use is not one (ROLE, READONLY): the Sentinels are asked again on
    // ask_loop's period until one names a master that says it is one. Told once.
    void lost_master(const std::string& why) {
        ask_soon_ = true;
        if (!role_ok_.exchange(false, std::memory_order_acq_rel)) return;
        log_.write(log_level::warn, "fleet",
                   "master " + cfg_.master_name + " at " + target_.host + ":" + std::to_string(target_.port) + " " + why);
        if (on_state_) on_state_(false);
    }

    // "+switch-master" payload: "<name> <old ip> <old port> <new ip> <new port>".
    void on_switch(const redis_reply& r) {
        if (r.elements.size() < 3 || r.elements[1].text != switch_channel) return;
        std::vector<std::string_view> words;
        std::string_view payload = r.elements[2].text;
        while (!payload.empty()) {
            const auto space = payload.find(' ');
            words.push_back(payload.substr(0, space));
            payload = space == std::string_view::npos ? std::string_view{} : payload.substr(space + 1);
        }
        if (words.size() != 5 || words[0] != cfg_.master_name) return;
        if (const auto port = port_of(words[4])) follow(std::string(words[3]), *port, "+switch-master");
    }

    void follow(std::string host, std::uint16_t port, const char* why) {
        if (host == target_.host && port == target_.port && master_started_) {
            if (!role_ok_.load(std::memory_order_acquire) && master_.up()) check_role();  // a replica promoted in place
            return;
        }
        log_.write(log_level::warn, "fleet",
                   "master " + cfg_.master_name + " is " + host + ":" + std::to_string(port) + " (" + why + ")");
        target_.host = std::move(host);
        target_.port = port;
        target_.password = cfg_.password;
        target_.db = cfg_.db;
        if (role_ok_.exchange(false, std::memory_order_acq_rel) && on_state_) on_state_(false);
        if (!master_started_) {
            master_started_ = true;
            master_.retarget(target_);
            master_.start();
        } else {
            master_.retarget(target_);
        }
    }

    void ask() {
        if (!query_.up()) return;
        query_.send(redis_command({"SENTINEL", "get-master-addr-by-name", cfg_.master_name}),
                    [this](boost::system::error_code ec, redis_reply r) {
                        if (ec || r.type != redis_reply::kind::array || r.elements.size() != 2) return;
                        if (const auto port = port_of(r.elements[1].text)) {
                            ask_soon_ = false;
                            follow(r.elements[0].text, *port, "asked a sentinel");
                        }
                    });
    }

    // Asks while the master is unknown or lost, every ask_period. A Sentinel that does
    // not answer for fleet.timeout, or whose master has not worked for master_patience,
    // gives way to the next.
    task<void> ask_loop() {
        auto sentinel_since = clock::now();
        auto master_since = clock::now();
        while (!stopped_) {
            const auto now = clock::now();
            if (query_.up() && (up() || now - master_since <= master_patience)) sentinel_since = now;
            if (up()) master_since = now;
            if (now - sentinel_since > cfg_.timeout && (!query_.up() || now - master_since > master_patience) &&
                cfg_.nodes.size() > 1) {
                sentinel_ = (sentinel_ + 1) % cfg_.nodes.size();
                query_.retarget(sentinel(sentinel_));
                watch_.retarget(sentinel(sentinel_));
                sentinel_since = master_since = now;
            }
            if (ask_soon_ || !master_started_ || !up()) ask();
            ask_timer_.expires_after(ask_period);
            if (auto [ec] = co_await ask_timer_.async_wait(use_tuple); ec || stopped_) co_return;
        }
    }

    asio::io_context& ioc_;
    const fleet_config cfg_;
    const logger& log_;
    std::function<void(bool)> on_state_;
    redis_connection master_;
    redis_connection query_;  ///< SENTINEL get-master-addr-by-name
    redis_connection watch_;  ///< subscribed to +switch-master
    redis_target target_;     ///< the master as last named
    bool master_started_ = false;
    bool ask_soon_ = true;
    bool stopped_ = false;
    std::size_t sentinel_ = 0;
    std::atomic<bool> role_ok_{false};
    steady_timer ask_timer_;
};

}  // namespace

std::unique_ptr<redis_store> make_sentinel_store(asio::io_context& ioc, const fleet_config& cfg, const logger& log,
                                                 std::vector<std::string> setup, std::function<void(bool)> on_state) {
    return std::make_unique<sentinel_store>(ioc, cfg, log, std::move(setup), std::move(on_state));
}

}  // namespace politeproxy::fleet
