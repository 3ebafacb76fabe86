#pragma once
// The responses the proxy makes itself (SPEC.md "What the proxy answers itself"): a status,
// an RFC 9209 Proxy-Status header, a one-line plain-text body, and Retry-After where due.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/policy/outcome.hpp"

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace politeproxy {

using answer = boost::beast::http::response<boost::beast::http::string_body>;

/// The answer for `why`. `retry_after` is rounded up to whole seconds; `next_hop` names
/// the parent proxy the request went to (RFC 9209 next-hop), if any.
answer make_answer(errc why, std::string_view details, bool keep_alive,
                   std::optional<clock::duration> retry_after = std::nullopt, std::string_view next_hop = {});

/// How one of the proxy's answers goes out.
struct answer_mode {
    bool keep_alive = false;  ///< the connection may carry another request afterwards
    bool head = false;        ///< it answers a HEAD: the header alone (RFC 9110 section 9.3.2)
};

/// The proxy's answer, as the final recipient, to OPTIONS with Max-Forwards: 0 (RFC 9110
/// section 7.6.2) or OPTIONS * (RFC 9112 section 3.2.4): 200 with `Allow` naming the
/// methods it forwards.
answer make_options_answer(bool keep_alive);

}  // namespace politeproxy
