#include "politeproxy/tls/config_check.hpp"

#include "politeproxy/tls/certificate_authority.hpp"

namespace politeproxy::tls {

loaded<config> check_interception_ca(loaded<config> c, std::string_view source) {
    if (!c || c->tls.mode != tls_config::mode_type::intercept) return c;
    if (auto ca = certificate_authority::load(c->tls.ca_cert, c->tls.ca_key); !ca)
        return loaded<config>(boost::system::in_place_error, std::string(source) + ": tls: " + ca.error());
    return c;
}

loaded<config> load_config_checked(const std::string& path) {
    return check_interception_ca(load_config_file(path), path);
}

}  // namespace politeproxy::tls
