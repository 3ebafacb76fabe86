#pragma once
// What a PUT body and a stored override share (private to proxy/policy/): the checks of
// the fields both carry, each answering the complaint's text ("must be ...") or nothing.
#include "politeproxy/policy/live_override.hpp"

#include <boost/json/value.hpp>

namespace politeproxy::override_detail {

/// A JSON number as a double (integers too); nothing for any other kind.
std::optional<double> number_of(const boost::json::value& v);

std::optional<std::string> check_concurrency(const boost::json::value& v, std::size_t& out);
std::optional<std::string> check_rate(const boost::json::value& v, double& out);
std::optional<std::string> check_reason(const boost::json::value& v, std::string& out);

}  // namespace politeproxy::override_detail
