#include "politeproxy/base/event.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace politeproxy {

task<bool> event::wait_until(clock::time_point deadline) {
    using namespace boost::asio::experimental::awaitable_operators;
    if (set_) co_return true;
    if (clock::now() >= deadline) co_return false;
    constexpr auto awaitable = boost::asio::as_tuple(boost::asio::use_awaitable_t<executor>());
    steady_timer alarm(timer_.get_executor(), deadline);
    const auto first = co_await (timer_.async_wait(awaitable) || alarm.async_wait(awaitable));
    co_return first.index() == 0;
}

}  // namespace politeproxy
