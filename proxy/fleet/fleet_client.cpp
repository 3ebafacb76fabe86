#include "fleet_client_impl.hpp"

namespace politeproxy::fleet {
namespace asio = boost::asio;

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
        l->store->start();
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
    for (auto& l : impl_->lanes) l->store->close_now();
}

bool fleet_client::store_up() const { return impl_->store_up.load(std::memory_order_acquire); }

bool fleet_client::up_for(const std::string& key) const {
    if (impl_->lanes.empty()) return false;
    const auto slot = impl_->slot_of(key);
    for (const auto& l : impl_->lanes)
        if (!l->store->up_for(slot)) return false;
    return true;
}

task<lease_answer> fleet_client::acquire(const std::string& key, lease_terms terms) {
    auto& l = impl_->current_lane();
    if (!l.store->up_for(impl_->slot_of(key))) co_return lease_answer{};
    if (auto handed = impl_->hand_on(l, key)) co_return *handed;
    impl::wanted w;
    {
        std::lock_guard lock(l.mutex);
        w.id = (static_cast<std::uint64_t>(l.index) << lane_shift) | l.book.next_id();
        w.member = l.book.member(w.id);
    }
    w.sent = clock::now();
    co_return co_await asio::async_initiate<decltype(asio::deferred), void(lease_answer)>(
        [this, &l, &key, terms, &w](auto handler) {
            w.done = [handler = std::move(handler)](lease_answer a) mutable {
                auto ex = asio::get_associated_executor(handler);
                asio::post(ex, [handler = std::move(handler), a]() mutable { std::move(handler)(a); });
            };
            impl_->want(l, key, terms, std::move(w));
        },
        asio::deferred);
}

void fleet_client::release(const std::string& key, std::uint64_t lease) {
    auto& l = impl_->lane_of(lease);
    {
        std::lock_guard lock(l.mutex);
        if (!l.book.remove(lease) || !impl_->started) return;
    }
    if (l.ioc.get_executor().running_in_this_thread()) return impl_->give(l, key, lease);
    asio::post(l.ioc, [this, &l, key, lease] { impl_->give(l, key, lease); });
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
    impl_->eval(impl_->current_lane(), impl_->slot_of(key), publish_script(),
                {"1", k.state, limit_text, rate_text, pause_text, impl_->state_ttl_ms},
                [](boost::system::error_code, redis_reply) {});
}

void fleet_client::withdraw(const std::string& key) {
    const host_keys k(key);
    impl_->eval(impl_->current_lane(), impl_->slot_of(key), withdraw_script(), {"2", k.waiters, k.polled, impl_->tag_text},
                [](boost::system::error_code, redis_reply) {});
}

}  // namespace politeproxy::fleet
