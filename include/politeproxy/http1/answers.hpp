#pragma once
// The responses the proxy makes itself (SPEC.md "What the proxy answers itself"): a status,
// an RFC 9209 Proxy-Status header, a one-line plain-text body, and Retry-After where due.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/policy/outcome.hpp"

#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/timed_socket.hpp"
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

struct proxy_context;

using answer = boost::beast::http::response<boost::beast::http::string_body>;

/// The answer for `why`. `retry_after` is rounded up to whole seconds.
answer make_answer(errc why, std::string_view details, bool keep_alive,
                   std::optional<clock::duration> retry_after = std::nullopt);

/// How one of the proxy's answers goes out.
struct answer_mode {
    bool keep_alive = false;  ///< the connection may carry another request afterwards
    bool head = false;        ///< it answers a HEAD: the header alone (RFC 9110 section 9.3.2)
};

/// Writes one of the proxy's own answers (counting refusals in rejected_total);
/// returns whether the connection may go on.
task<bool> send_answer(proxy_context& ctx, timed_socket& client, errc why,
                       std::string_view details, answer_mode mode,
                       std::optional<clock::duration> retry_after = std::nullopt);

/// The proxy's answer, as the final recipient, to OPTIONS with Max-Forwards: 0 (RFC 9110
/// section 7.6.2) or OPTIONS * (RFC 9112 section 3.2.4): 200 with `Allow` naming the
/// methods it forwards.
answer make_options_answer(bool keep_alive);
task<bool> send_options_answer(proxy_context& ctx, timed_socket& client, bool keep_alive);

}  // namespace politeproxy
