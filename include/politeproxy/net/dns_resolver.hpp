#pragma once
#include "politeproxy/base/clock.hpp"

#include "politeproxy/base/executor.hpp"
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace politeproxy {

/// Name look-ups on a small pool of threads, each bounded by a deadline.
///
/// Asio's own resolver runs every getaddrinfo on one private thread, so one name whose
/// DNS server never answers delays every other look-up, and its operation cannot be
/// cut short. Here look-ups run side by side on `threads` threads, and the caller stops
/// waiting at its deadline (the abandoned look-up finishes in the background and its
/// result is dropped).
///
/// Thread safety: resolve() may be called from any executor. Destroy before the
/// io_context the callers run on (the destructor joins the look-up threads).
class dns_resolver {
public:
    struct result {
        boost::system::error_code ec;  ///< timed_out at the deadline, or the look-up's error
        std::vector<boost::asio::ip::tcp::endpoint> endpoints;
    };

    explicit dns_resolver(std::size_t threads);
    ~dns_resolver();
    dns_resolver(const dns_resolver&) = delete;
    dns_resolver& operator=(const dns_resolver&) = delete;

    task<result> resolve(std::string host, std::uint16_t port, clock::time_point deadline);

private:
    boost::asio::thread_pool pool_;
};

}  // namespace politeproxy
