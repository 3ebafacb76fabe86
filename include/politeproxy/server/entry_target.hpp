#pragma once
// The entry's last judgement before the credentials (policy/entry_rules.hpp gives the
// order): the request's target, and its destination where the deny list needs no DNS.
// HTTP/1.1 and HTTP/2 requests and CONNECTs all pass here, so a request refused for where
// it goes costs no password hash, whatever protocol it came in.
#include "politeproxy/base/error.hpp"
#include "politeproxy/http1/origin_target.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace politeproxy {

struct config;

/// Why the entry refused a request's target.
/// why: a target_error's, connect_port_denied or destination_denied.
using entry_refusal = failure;

/// A target as its protocol's parser read it (parse_origin_target, or
/// parse_intercepted_target inside intercepted TLS), judged: why it is refused, if it is.
/// (The target stays where it was parsed: this is every request's path.)
std::optional<entry_refusal> refuse_target(const config& cfg, const std::variant<origin_target, target_error>& parsed);

/// A CONNECT's authority: parsed (parse_connect_target), its port in
/// security.connect_ports, its destination.
std::variant<connect_target, entry_refusal> judge_connect(const config& cfg, std::string_view authority);

}  // namespace politeproxy
