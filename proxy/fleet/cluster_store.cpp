// redis_store for Redis Cluster: a connection per master, the slot map, redirections.
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/fleet/cluster_slots.hpp"
#include "politeproxy/fleet/redis_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <atomic>

namespace politeproxy::fleet {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr int most_redirects = 5;
constexpr std::size_t most_nodes = 1024;
constexpr auto retry_initial = 10ms;
constexpr auto retry_max = 100ms;
constexpr auto refresh_while_up = 5s;
constexpr auto refresh_while_down = 1s;

std::string text_of(const node_address& a) { return a.host + ":" + std::to_string(a.port); }

class cluster_store final : public redis_store {
public:
    cluster_store(asio::io_context& ioc, const fleet_config& cfg, const logger& log, std::vector<std::string> setup,
                  std::function<void(bool)> on_state)
        : ioc_(ioc),
          cfg_(cfg),
          log_(log),
          setup_(std::move(setup)),
          on_state_(std::move(on_state)),
          by_index_(new std::atomic<node*>[most_nodes]),
          owner_(new std::atomic<std::uint16_t>[cluster_slots]),
          refresh_timer_(ioc.get_executor()) {
        for (std::size_t i = 0; i < most_nodes; ++i) by_index_[i].store(nullptr, std::memory_order_relaxed);
        for (std::size_t s = 0; s < cluster_slots; ++s) owner_[s].store(0, std::memory_order_relaxed);
        for (const auto& seed : cfg_.nodes) node_for({seed.host, seed.port});
    }

    void start() override {
        started_ = true;
        for (auto& n : nodes_) n->conn->start();
        asio::co_spawn(ioc_, refresh_loop(), asio::detached);
    }

    void close_now() override {
        stopped_ = true;
        up_.store(false, std::memory_order_release);
        refresh_timer_.cancel();
        for (auto& n : nodes_) n->conn->close_now();
    }

    bool up() const override { return up_.load(std::memory_order_acquire); }

    bool up_for(std::uint16_t slot) const override {
        const auto index = owner_[slot].load(std::memory_order_acquire);
        if (index == 0) return false;
        const node* n = by_index_[index - 1].load(std::memory_order_acquire);
        return n && n->conn->up();
    }

    void send(std::uint16_t slot, std::string command, handler done) override {
        attempt a{slot, std::move(command), std::move(done), clock::now() + cfg_.timeout};
        if (ioc_.get_executor().running_in_this_thread()) {
            dispatch(std::move(a));
            return;
        }
        asio::post(ioc_, [this, a = std::move(a)]() mutable { dispatch(std::move(a)); });
    }

private:
    struct node {
        node_address address;
        std::size_t index = 0;
        std::unique_ptr<redis_connection> conn;
        bool ever_up = false;  ///< a node still making its first connection is waited for
    };
    struct attempt {
        std::uint16_t slot = 0;
        std::string command;
        handler done;
        clock::time_point deadline;
        int redirects = 0;
        node* ask = nullptr;  ///< after ASK: this command goes there, after ASKING
        clock::duration backoff = retry_initial;
    };

    node* owner(std::uint16_t slot) const {
        const auto index = owner_[slot].load(std::memory_order_relaxed);
        return index == 0 ? nullptr : nodes_[index - 1].get();
    }

    node* node_for(const node_address& address) {
        for (auto& n : nodes_)
            if (n->address == address) return n.get();
        if (nodes_.size() == most_nodes) return nullptr;
        auto n = std::make_unique<node>();
        n->address = address;
        n->index = nodes_.size();
        node* raw = n.get();
        n->conn = std::make_unique<redis_connection>(ioc_, redis_target{address.host, address.port, cfg_.password, 0},
                                                     cfg_.timeout, log_, setup_, [this, raw](bool up) { node_state(*raw, up); });
        by_index_[raw->index].store(raw, std::memory_order_release);
        nodes_.push_back(std::move(n));
        if (started_ && !stopped_) raw->conn->start();
        return raw;
    }

    void dispatch(attempt a) {
        if (stopped_) return a.done(errc::fleet_unavailable, {});
        node* n = a.ask ? a.ask : owner(a.slot);
        if (!n || !n->conn->up()) {
            // Before the map is read, or while a node named by a redirection makes its
            // first connection, the command waits (within its deadline); a slot whose
            // master was reachable and is not fails at once: the caller takes its share.
            const bool waiting = !n ? !map_known_ : !n->ever_up;
            if (waiting && clock::now() + a.backoff < a.deadline) return retry_later(std::move(a));
            return a.done(errc::fleet_unavailable, {});
        }
        if (a.ask) n->conn->send(redis_command({"ASKING"}), [](boost::system::error_code, redis_reply) {});
        std::string command = a.command;  // kept for a redirection
        n->conn->send(std::move(command), [this, n, a = std::move(a)](boost::system::error_code ec, redis_reply r) mutable {
            on_reply(std::move(a), *n, ec, std::move(r));
        });
    }

    void on_reply(attempt a, node& n, boost::system::error_code ec, redis_reply r) {
        if (ec || !r.is_error()) return a.done(ec, std::move(r));
        if (auto to = read_redirection(r.text, n.address); to && a.redirects < most_redirects) {
            ++a.redirects;
            node* dest = node_for(to->to);
            if (!dest) return a.done(errc::fleet_unavailable, {});
            a.ask = nullptr;
            if (to->moved) {
                owner_[to->slot].store(static_cast<std::uint16_t>(dest->index + 1), std::memory_order_release);
                refresh();
            } else {
                a.ask = dest;
            }
            return dispatch(std::move(a));
        }
        const bool down = is_cluster_down(r.text);
        if ((down || is_try_again(r.text)) && clock::now() + a.backoff < a.deadline) {
            if (down) refresh();
            a.ask = nullptr;
            return retry_later(std::move(a));
        }
        if (down && owner_[a.slot].exchange(0, std::memory_order_acq_rel) != 0) {
            // The slot is not served: its keys are down until the map says otherwise.
            recompute(false);
            refresh();
        }
        a.done({}, std::move(r));
    }

    void retry_later(attempt a) {
        auto timer = std::make_shared<steady_timer>(ioc_.get_executor());
        timer->expires_after(a.backoff);
        a.backoff = std::min<clock::duration>(a.backoff * 2, retry_max);
        timer->async_wait([this, timer, a = std::move(a)](boost::system::error_code) mutable { dispatch(std::move(a)); });
    }

    // CLUSTER SLOTS from a reachable node; one at a time (another asked meanwhile runs after).
    void refresh() {
        if (stopped_) return;
        if (refreshing_) {
            refresh_again_ = true;
            return;
        }
        node* from = nullptr;
        for (auto& n : nodes_)
            if (n->conn->up()) {
                from = n.get();
                break;
            }
        if (!from) return;
        refreshing_ = true;
        from->conn->send(redis_command({"CLUSTER", "SLOTS"}), [this, from](boost::system::error_code ec, redis_reply r) {
            refreshing_ = false;
            if (!ec) {
                if (auto ranges = read_cluster_slots(r, from->address)) apply(*ranges);
                else log_.write(log_level::error, "fleet", "unexpected CLUSTER SLOTS answer from " + text_of(from->address));
            }
            if (std::exchange(refresh_again_, false)) refresh();
        });
    }

    void apply(const std::vector<slot_range>& ranges) {
        std::vector<std::uint16_t> next(cluster_slots, 0);
        for (const auto& r : ranges) {
            const node* m = node_for(r.master);
            if (!m) continue;
            for (std::size_t s = r.first; s <= r.last; ++s) next[s] = static_cast<std::uint16_t>(m->index + 1);
        }
        bool moved = !map_known_;
        for (std::size_t s = 0; s < cluster_slots; ++s)
            if (owner_[s].exchange(next[s], std::memory_order_acq_rel) != next[s]) moved = true;
        map_known_ = true;
        // A slot that moved (a failover, a migration) is asserted again where it is now.
        if (moved) recompute(true);
    }

    void node_state(node& n, bool up) {
        if (up) {
            n.ever_up = true;
            if (!map_known_) refresh();
        } else {
            refresh();  // a failover may have moved its slots
        }
        recompute(up);
    }

    void recompute(bool came_up) {
        bool all = map_known_;
        for (std::size_t s = 0; all && s < cluster_slots; ++s) all = up_for(static_cast<std::uint16_t>(s));
        if (up_.exchange(all, std::memory_order_acq_rel) != all)
            log_.write(all ? log_level::info : log_level::warn, "fleet",
                       std::string("cluster ") + (all ? "up: every slot's master reachable" : "partly down"));
        if (on_state_) on_state_(came_up);
    }

    task<void> refresh_loop() {
        while (!stopped_) {
            refresh_timer_.expires_after(up() ? refresh_while_up : refresh_while_down);
            if (auto [ec] = co_await refresh_timer_.async_wait(use_tuple); ec || stopped_) co_return;
            refresh();
        }
    }

    asio::io_context& ioc_;
    const fleet_config cfg_;
    const logger& log_;
    const std::vector<std::string> setup_;
    std::function<void(bool)> on_state_;
    std::vector<std::unique_ptr<node>> nodes_;                  ///< on the loop only; never shrinks
    std::unique_ptr<std::atomic<node*>[]> by_index_;            ///< nodes_ for any thread
    std::unique_ptr<std::atomic<std::uint16_t>[]> owner_;       ///< slot -> node index + 1; 0: unserved
    std::atomic<bool> up_{false};
    bool started_ = false;
    bool stopped_ = false;
    bool map_known_ = false;
    bool refreshing_ = false;
    bool refresh_again_ = false;
    steady_timer refresh_timer_;
};

}  // namespace

std::unique_ptr<redis_store> make_cluster_store(asio::io_context& ioc, const fleet_config& cfg, const logger& log,
                                                std::vector<std::string> setup, std::function<void(bool)> on_state) {
    return std::make_unique<cluster_store>(ioc, cfg, log, std::move(setup), std::move(on_state));
}

}  // namespace politeproxy::fleet
