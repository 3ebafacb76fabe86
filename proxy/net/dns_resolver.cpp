#include "politeproxy/net/dns_resolver.hpp"
#include "politeproxy/base/off_thread.hpp"

#include <boost/asio/this_coro.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

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

}  // namespace

dns_resolver::dns_resolver(std::size_t threads) : pool_(threads) {}

dns_resolver::~dns_resolver() {
    pool_.stop();
    pool_.join();
}

task<dns_resolver::result> dns_resolver::resolve(std::string host, std::uint16_t port,
                                                 clock::time_point deadline) {
    auto work = [host = std::move(host), port] { return lookup(host, port); };  // named: see off_thread
    if (auto r = co_await off_thread(pool_, std::move(work), deadline)) co_return std::move(*r);
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
        co_return result{asio::error::operation_aborted, {}};
    co_return result{asio::error::timed_out, {}};
}

}  // namespace politeproxy
