#include "politeproxy/server/entry_target.hpp"

#include "politeproxy/config/config.hpp"
#include "politeproxy/net/origin_connect.hpp"

namespace politeproxy {

std::optional<entry_refusal> refuse_target(const config& cfg, const std::variant<origin_target, target_error>& parsed) {
    if (const auto* e = std::get_if<target_error>(&parsed)) return entry_refusal{e->why, e->details};
    const origin_target& target = std::get<origin_target>(parsed);
    if (auto denied = check_known_destination(cfg, target.key, target.port, target.address))
        return entry_refusal{denied->why, std::move(denied->details)};
    return std::nullopt;
}

std::variant<connect_target, entry_refusal> judge_connect(const config& cfg, std::string_view authority) {
    auto parsed = parse_connect_target(authority);
    if (const auto* e = std::get_if<target_error>(&parsed)) return entry_refusal{e->why, e->details};
    connect_target& target = std::get<connect_target>(parsed);
    if (!cfg.connect_port_allowed(target.port))
        return entry_refusal{errc::connect_port_denied,
                             "CONNECT to port " + std::to_string(target.port) + " is not in security.connect_ports"};
    if (auto denied = check_known_destination(cfg, target.key, target.port, target.address))
        return entry_refusal{denied->why, std::move(denied->details)};
    return std::move(target);
}

}  // namespace politeproxy
