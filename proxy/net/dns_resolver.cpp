#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/base/executor.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <mutex>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

dns_resolver::result lookup(const std::string& host, std::uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
    dns_resolver::result r;
    if (rc != 0) {
        r.ec = asio::error::host_not_found;
        return r;
    }
    for (const addrinfo* a = list; a; a = a->ai_next) {
        tcp::endpoint e;
        if (a->ai_addrlen > e.capacity()) continue;
        std::memcpy(e.data(), a->ai_addr, a->ai_addrlen);
        e.resize(a->ai_addrlen);
        e.port(port);
        r.endpoints.push_back(e);
    }
    ::freeaddrinfo(list);
    if (r.endpoints.empty()) r.ec = asio::error::host_not_found;
    return r;
}

// Shared by the waiting coroutine and the look-up thread; the timer is only touched on
// the coroutine's executor.
struct pending_lookup {
    explicit pending_lookup(executor ex) : timer(std::move(ex)) {}
    steady_timer timer;
    std::mutex mutex;
    bool done = false;
    dns_resolver::result r;
};

}  // namespace

dns_resolver::dns_resolver(std::size_t threads) : pool_(threads) {}

dns_resolver::~dns_resolver() {
    pool_.stop();
    pool_.join();
}

task<dns_resolver::result> dns_resolver::resolve(std::string host, std::uint16_t port,
                                                 clock::time_point deadline) {
    auto p = std::make_shared<pending_lookup>(co_await asio::this_coro::executor);
    p->timer.expires_at(deadline);
    asio::post(pool_, [p, host = std::move(host), port] {
        auto r = lookup(host, port);
        {
            std::lock_guard lock(p->mutex);
            p->r = std::move(r);
            p->done = true;
        }
        auto& timer = p->timer;
        asio::post(timer.get_executor(), [p] { p->timer.cancel(); });
    });
    for (;;) {
        auto [ec] = co_await p->timer.async_wait(use_tuple);
        {
            std::lock_guard lock(p->mutex);
            if (p->done) co_return std::move(p->r);
        }
        if (!ec) co_return result{asio::error::timed_out, {}};
        if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
            co_return result{asio::error::operation_aborted, {}};
    }
}

}  // namespace politeproxy
