#include "politeproxy/fleet/redis_store.hpp"

namespace politeproxy::fleet {
namespace {

// One Redis: every slot is the one node's.
class single_store final : public redis_store {
public:
    single_store(boost::asio::io_context& ioc, const fleet_config& cfg, const logger& log, std::vector<std::string> setup,
                 std::function<void(bool)> on_state)
        : conn_(ioc, redis_target{cfg.nodes.front().host, cfg.nodes.front().port, cfg.password, cfg.db}, cfg.timeout, log,
                std::move(setup), [on_state = std::move(on_state)](bool up) {
                    if (on_state) on_state(up);
                }) {}

    void start() override { conn_.start(); }
    void close_now() override { conn_.close_now(); }
    bool up() const override { return conn_.up(); }
    bool up_for(std::uint16_t) const override { return conn_.up(); }
    void send(std::uint16_t, std::string command, handler done) override { conn_.send(std::move(command), std::move(done)); }

private:
    redis_connection conn_;
};

}  // namespace

std::unique_ptr<redis_store> make_redis_store(boost::asio::io_context& ioc, const fleet_config& cfg, const logger& log,
                                              std::vector<std::string> setup, std::function<void(bool)> on_state) {
    switch (cfg.kind) {
    case fleet_config::topology::cluster: return make_cluster_store(ioc, cfg, log, std::move(setup), std::move(on_state));
    case fleet_config::topology::sentinel: return make_sentinel_store(ioc, cfg, log, std::move(setup), std::move(on_state));
    case fleet_config::topology::single: break;
    }
    return std::make_unique<single_store>(ioc, cfg, log, std::move(setup), std::move(on_state));
}

}  // namespace politeproxy::fleet
