#pragma once
// The proxy's own answers (http1/answers.hpp) written to an HTTP/1.1 client.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/base/executor.hpp"
#include "politeproxy/http1/answers.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <optional>
#include <string_view>

namespace politeproxy {

struct proxy_context;

/// Counts one of the proxy's own answers (refusals in rejected_total) and logs it at debug
/// level, whatever protocol carries it.
void count_answer(proxy_context& ctx, errc why, std::string_view details);

/// Writes one of the proxy's own answers (counting refusals in rejected_total);
/// returns whether the connection may go on.
task<bool> send_answer(proxy_context& ctx, timed_socket& client, errc why,
                       std::string_view details, answer_mode mode,
                       std::optional<clock::duration> retry_after = std::nullopt, std::string_view next_hop = {});

/// make_options_answer(), written.
task<bool> send_options_answer(proxy_context& ctx, timed_socket& client, bool keep_alive);

}  // namespace politeproxy
