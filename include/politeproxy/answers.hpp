#pragma once
// The responses the proxy makes itself (SPEC.md "What the proxy answers itself"): a status,
// an RFC 9209 Proxy-Status header, a one-line plain-text body, and Retry-After where due.
#include "politeproxy/clock.hpp"
#include "politeproxy/error.hpp"

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <optional>
#include <string_view>

namespace politeproxy {

using answer = boost::beast::http::response<boost::beast::http::string_body>;

/// The answer for `why`. `retry_after` is rounded up to whole seconds.
answer make_answer(errc why, std::string_view details, bool keep_alive,
                   std::optional<clock::duration> retry_after = std::nullopt);

/// The Proxy-Status entry appended to responses that come from the origin.
std::string queue_wait_status(clock::duration waited);

}  // namespace politeproxy
