#pragma once
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace politeproxy {

/// Expected network events are values: `auto [ec, n] = co_await op(..., use_tuple);`.
inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace politeproxy
