#pragma once
#include "politeproxy/http1/wire_fields.hpp"

#include <boost/beast/http/field.hpp>

#include <string_view>

namespace politeproxy {

/// Connection, Proxy-Connection, Keep-Alive, TE, Upgrade, Proxy-Authorization and
/// Proxy-Authenticate: they describe one connection, never the message.
bool always_hop_by_hop(boost::beast::http::field f);

/// Whether a field that Connection lists under this name is removed with it: every one
/// but the framing fields (Content-Length, Transfer-Encoding: the relay frames by them)
/// and the fixed set above (removed anyway).
bool removed_when_listed(boost::beast::http::field listed);

/// Removes the fields that describe one connection rather than the message (RFC 9110
/// section 7.6.1): Connection and every field it names, Proxy-Connection, Keep-Alive,
/// TE, Upgrade, Proxy-Authorization, Proxy-Authenticate. Framing fields
/// (Content-Length, Transfer-Encoding) stay: the relay frames the body by them.
void strip_hop_by_hop(wire_fields& fields);

/// True when any Via entry in `fields` is this proxy's `via` ("1.1 politeproxy-<id>").
bool via_contains(const wire_fields& fields, std::string_view via);
/// The same for one Via field's value.
bool via_value_contains(std::string_view value, std::string_view via);

}  // namespace politeproxy
