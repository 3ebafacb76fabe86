// clients: (SPEC.md "Configuration"): who a request is for (identify_by), how a host's
// slots are shared among clients, their weights and caps.
#include "config_reader.hpp"

#include "politeproxy/base/char_class.hpp"

#include <algorithm>
#include <array>

namespace politeproxy {

unsigned clients_config::weight_of(std::string_view name) const {
    for (const auto& [client, weight] : weights)
        if (client == name) return weight;
    return 1;
}

namespace config_detail {

namespace {

// Fields the proxy reads or writes itself: naming one as the client's header would strip
// what framing, routing or authentication depend on.
constexpr std::array<std::string_view, 14> proxy_fields = {
    "host",   "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te",
    "upgrade", "trailer",       "via",               "max-forwards", "expect",   "proxy-authorization",
    "proxy-status"};

constexpr unsigned max_weight = 1000;

}  // namespace

void load_clients(const config_reader& r, const YAML::Node& n, config& c) {
    if (!n) return;
    clients_config out;
    if (!n.IsNull()) {
        r.expect_map(n, "clients");
        r.only_keys(n, "clients", {"identify_by", "share", "weights", "max_waiting", "max_in_flight"});
        if (n["identify_by"]) {
            const std::string how = r.text(n["identify_by"], "clients.identify_by");
            if (how == "user") {
                out.identify_by = clients_config::identity::user;
            } else if (how == "address") {
                out.identify_by = clients_config::identity::address;
            } else if (how.starts_with("header:")) {
                out.identify_by = clients_config::identity::header;
                out.header = lower_case(how.substr(7));
                const bool token = !out.header.empty() && std::all_of(out.header.begin(), out.header.end(), [](char ch) {
                    return is_tchar(static_cast<unsigned char>(ch));
                });
                if (!token) r.fail(n["identify_by"], "clients.identify_by: '" + how + "' does not name a header field");
                if (std::find(proxy_fields.begin(), proxy_fields.end(), out.header) != proxy_fields.end())
                    r.fail(n["identify_by"], "clients.identify_by: " + out.header +
                                                 " is a field the proxy reads or writes itself; name a header of its own");
            } else {
                r.fail(n["identify_by"], "clients.identify_by: '" + how + "' is not user, address or header:NAME");
            }
        }
        if (n["share"]) {
            const std::string share = r.text(n["share"], "clients.share");
            if (share != "fair" && share != "fifo") r.fail(n["share"], "clients.share: '" + share + "' is not fair or fifo");
            out.fair = share == "fair";
        }
        if (const auto w = n["weights"]; w && !w.IsNull()) {
            r.expect_map(w, "clients.weights");
            for (const auto& kv : w) {
                const std::string name = r.text(kv.first, "clients.weights name");
                const std::size_t weight = r.count(kv.second, "clients.weights." + name, 1);
                if (weight > max_weight)
                    r.fail(kv.second, "clients.weights." + name + " must be at most " + std::to_string(max_weight));
                for (const auto& [seen, unused] : out.weights)
                    if (seen == name) r.fail(kv.first, "clients.weights: " + name + " is listed twice");
                out.weights.emplace_back(name, static_cast<unsigned>(weight));
            }
        }
        if (n["max_waiting"]) out.max_waiting = r.count(n["max_waiting"], "clients.max_waiting", 1);
        if (n["max_in_flight"]) out.max_in_flight = r.count(n["max_in_flight"], "clients.max_in_flight", 1);
    }
    if (out.identify_by == clients_config::identity::user && !c.security.users)
        r.fail(n["identify_by"] ? n["identify_by"] : n,
               "clients.identify_by: user needs security.users_file (or identify_by: address or header:NAME)");
    c.clients = std::move(out);
}

}  // namespace config_detail
}  // namespace politeproxy
