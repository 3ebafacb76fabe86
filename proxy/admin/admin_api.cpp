#include "politeproxy/admin/admin_api.hpp"

#include "politeproxy/admin/admin_server.hpp"
#include "politeproxy/admin/hosts_view.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/live_overrides.hpp"
#include "politeproxy/policy/admin_tokens.hpp"
#include "politeproxy/policy/host_key.hpp"
#include "politeproxy/policy/public_suffixes.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <charconv>
#include <utility>

namespace politeproxy {
namespace http = boost::beast::http;

namespace {

constexpr std::size_t default_page = 100;
constexpr std::size_t max_page = 1000;

void json(admin_response& res, http::status status, std::string body) {
    res.result(status);
    res.set(http::field::content_type, "application/json");
    res.body() = std::move(body);
}

void error(admin_response& res, http::status status, std::string_view field, std::string_view message) {
    std::string body = "{\"error\": ";
    append_json_string(body, message);
    if (!field.empty()) {
        body += ", \"field\": ";
        append_json_string(body, field);
    }
    json(res, status, body + "}\n");
}

struct page_query {
    std::string sort = "key", filter, after;
    std::size_t limit = default_page;
};

// The query's parameters; false (answered 400) for one that is not understood.
bool read_query(std::string_view target, page_query& q, admin_response& res) {
    const auto url = boost::urls::parse_origin_form(target);
    if (!url) {
        error(res, http::status::bad_request, "", "the target is not a valid URL");
        return false;
    }
    for (const auto& param : url->params()) {
        if (param.key == "sort") q.sort = param.value;
        else if (param.key == "filter") q.filter = param.value;
        else if (param.key == "after") q.after = param.value;
        else if (param.key == "limit") {
            const auto [end, ec] = std::from_chars(param.value.data(), param.value.data() + param.value.size(), q.limit);
            if (ec != std::errc() || end != param.value.data() + param.value.size() || q.limit == 0) {
                error(res, http::status::bad_request, "limit", "limit must be a whole number >= 1");
                return false;
            }
            q.limit = std::min(q.limit, max_page);
        } else {
            error(res, http::status::bad_request, param.key, "unknown parameter '" + param.key + "'");
            return false;
        }
    }
    if (q.sort != "key" && q.sort != "waiting" && q.sort != "in_flight" && q.sort != "throttled") {
        error(res, http::status::bad_request, "sort", "sort must be key, waiting, in_flight or throttled");
        return false;
    }
    return true;
}

// One page of `items` (in order) after the key `after`: after its last row when it is
// there, else (sorted by key: it went away meanwhile) after where it would be. Rows of
// one key stay on one page (the page grows past `limit` for them), so `next`, the last
// key of the page, never splits them. `key_of(item)`.
// `more`: members after "next" (each as `,\n "name": value`).
template <class Item, class KeyOf, class Write>
std::string page_of(const std::vector<Item>& items, const page_query& q, const char* name, KeyOf key_of, Write write,
                    bool by_key, std::string_view more = {}) {
    std::size_t from = 0;
    if (!q.after.empty()) {
        const auto last = std::find_if(items.rbegin(), items.rend(), [&](const Item& i) { return key_of(i) == q.after; });
        if (last != items.rend()) from = static_cast<std::size_t>(items.rend() - last);
        else if (by_key)
            from = static_cast<std::size_t>(
                std::find_if(items.begin(), items.end(), [&](const Item& i) { return key_of(i) > q.after; }) - items.begin());
    }
    std::size_t to = std::min(items.size(), from + q.limit);
    while (to > from && to < items.size() && key_of(items[to]) == key_of(items[to - 1])) ++to;
    std::string out = std::string("{\"") + name + "\": [";
    for (std::size_t i = from; i < to; ++i) {
        out += i == from ? "\n  " : ",\n  ";
        write(out, items[i]);
    }
    out += "],\n \"next\": ";
    if (to < items.size() && to > from) append_json_string(out, key_of(items[to - 1]));
    else out += "null";
    out += more;
    return out + "}\n";
}

std::uint64_t throttled(const host_series_row& h) { return h.outcomes[static_cast<std::size_t>(outcome::throttled)]; }

// The hosts a listing matched, all of them: how many, their requests in flight and
// waiting, and how many are paused (the status page's summary line, at any number of hosts).
std::string total_json(const std::vector<host_series_row>& hosts, clock::time_point now) {
    std::size_t in_flight = 0, waiting = 0, paused = 0;
    for (const auto& h : hosts) {
        in_flight += h.in_flight;
        waiting += h.waiting;
        if (h.paused_until > now) ++paused;
    }
    return ",\n \"total\": {\"hosts\": " + std::to_string(hosts.size()) + ", \"in_flight\": " + std::to_string(in_flight) +
           ", \"waiting\": " + std::to_string(waiting) + ", \"paused\": " + std::to_string(paused) + "}";
}

// Filtered and sorted on every host's row (host_series_row); only the page's hosts are
// snapshot in full: a page of a million hosts costs their rows, not their snapshots.
// sort=waiting: most waiting first, then most in flight; sort=in_flight: most in flight
// first, then most waiting; sort=throttled: most throttled answers first; then by key.
void list_hosts(const admin_view& view, const page_query& q, admin_response& res) {
    auto hosts = view.gates.series_rows();
    std::erase_if(hosts, [&](const host_series_row& h) { return h.key.find(q.filter) == std::string::npos; });
    const auto measure = [&](const host_series_row& h) -> std::pair<std::uint64_t, std::uint64_t> {
        if (q.sort == "waiting") return {h.waiting, h.in_flight};
        if (q.sort == "in_flight") return {h.in_flight, h.waiting};
        if (q.sort == "throttled") return {throttled(h), 0};
        return {};
    };
    const auto busier = [&](const host_series_row& a, const host_series_row& b) {
        const auto ma = measure(a), mb = measure(b);
        return ma != mb ? ma > mb : a.key < b.key;
    };
    // The first page (the status page's, every second) needs only its own rows in order.
    if (q.after.empty()) {
        const auto page_end = hosts.begin() + static_cast<std::ptrdiff_t>(std::min(hosts.size(), q.limit));
        std::partial_sort(hosts.begin(), page_end, hosts.end(), busier);
    } else {
        std::sort(hosts.begin(), hosts.end(), busier);
    }
    const auto now = view.gates.time().now();
    const auto wall_now = std::chrono::system_clock::now();
    json(res, http::status::ok,
         page_of(hosts, q, "hosts", [](const host_series_row& h) -> const std::string& { return h.key; },
                 [&](std::string& out, const host_series_row& row) {
                     const auto h = view.gates.snapshot({row.key}, now);
                     if (!h.empty()) return append_host_json(out, h.front(), view.parents, wall_now, view.names);
                     out += "{\"key\": ";  // evicted since its row was read
                     append_json_string(out, row.key);
                     out += ", \"tracked\": false}";
                 },
                 q.sort == "key", total_json(hosts, now)));
}

void one_host(const admin_view& view, const std::string& key, admin_response& res) {
    if (const auto tracked = view.gates.snapshot({key}, view.gates.time().now()); !tracked.empty()) {
        std::string out;
        append_host_json(out, tracked.front(), view.parents, std::chrono::system_clock::now(), view.names);
        return json(res, http::status::ok, out + "\n");
    }
    if (auto live = view.overrides.find(key)) {  // overridden, not tracked (yet, or any more)
        std::string out = "{\"key\": ";
        append_json_string(out, key);
        return json(res, http::status::ok, out + ", \"tracked\": false, \"override_source\": \"api\", \"override\": " +
                                                to_json(*live) + "}\n");
    }
    error(res, http::status::not_found, "", "no such host: " + key + " is neither tracked nor overridden");
}

void list_overrides(const admin_view& view, const page_query& q, admin_response& res) {
    struct row {
        std::string key;
        std::string json;
    };
    std::vector<row> rows;
    for (const auto& o : view.overrides.list()) {
        std::string j = to_json(*o);
        j.insert(j.size() - 1, ", \"source\": \"api\"");
        rows.push_back({o->key, std::move(j)});
    }
    const auto cfg = view.gates.current_config();
    const auto today = utc_today();
    for (const auto& o : cfg->hosts) {
        std::string j = "{\"key\": ";
        append_json_string(j, o.pattern);
        j += ", \"source\": \"registry\", \"concurrency\": " + std::to_string(o.policy.concurrency) + ", \"reason\": ";
        append_json_string(j, o.reason);
        j += o.expired(today) ? ", \"expired\": true}" : ", \"expired\": false}";
        rows.push_back({o.pattern, std::move(j)});
    }
    std::stable_sort(rows.begin(), rows.end(), [](const row& a, const row& b) { return a.key < b.key; });
    std::erase_if(rows, [&](const row& r) { return r.key.find(q.filter) == std::string::npos; });
    json(res, http::status::ok, page_of(rows, q, "overrides", [](const row& r) -> const std::string& { return r.key; },
                                        [](std::string& out, const row& r) { out += r.json; }, true));
}

// The gate key a path's host names (SPEC: one origin is one key, however spelled): the
// host's key, its registrable domain under `key: domain`; false (answered 400) for
// anything that is not a host, or not an address under `key: ip`.
bool gate_key_of(const admin_view& view, std::string_view host, std::string& key, admin_response& res) {
    const auto named = read_host(host);
    if (!named) {
        error(res, http::status::bad_request, "key", "the path names no host (a name or an address)");
        return false;
    }
    const auto cfg = view.gates.current_config();
    if (cfg->key == config::key_kind::ip && !named->address) {
        error(res, http::status::bad_request, "key", "with defaults.key: ip a host is named by its address");
        return false;
    }
    std::string storage;
    key = view.gates.gate_key(*cfg, named->key, named->key, storage);
    return true;
}

// The token's name, or the answer why there is none (401, or 403 when the API is read-only).
std::optional<std::string> writer(const admin_view& view, const admin_request& req, admin_response& res) {
    const auto cfg = view.gates.current_config();
    if (!cfg->admin.tokens) {
        error(res, http::status::forbidden, "", "the API is read-only: no admin.token_file is configured");
        return std::nullopt;
    }
    auto name = cfg->admin.tokens->name_for(req[http::field::authorization]);
    if (!name) {
        res.set(http::field::www_authenticate, "Bearer realm=\"politeproxy\"");
        error(res, http::status::unauthorized, "", "a write needs Authorization: Bearer with a token of admin.token_file");
    }
    return name;
}

void put_override(const admin_view& view, const std::string& key, const admin_request& req, admin_response& res) {
    const auto name = writer(view, req, res);
    if (!name) return;
    const auto cfg = view.gates.current_config();
    // Raising above the defaults needs a reason, as in the registry (SPEC.md).
    auto parsed = parse_override_body(req.body(), key, cfg->defaults, *name, std::chrono::system_clock::now());
    if (auto* bad = std::get_if<body_error>(&parsed)) return error(res, http::status::bad_request, bad->field, bad->message);
    const std::string out = to_json(std::get<live_override>(parsed));
    view.overrides.put(std::move(std::get<live_override>(parsed)));
    json(res, http::status::ok, out + "\n");
}

void delete_override(const admin_view& view, const std::string& key, const admin_request& req, admin_response& res) {
    const auto name = writer(view, req, res);
    if (!name) return;
    const auto removed = view.overrides.remove(key, *name);
    if (removed == live_overrides::removal::none)
        return error(res, http::status::not_found, "", "no override of " + key + " (the registry's stay in the file)");
    // With a fleet the store is told even when this process has not heard of the override yet.
    json(res, http::status::ok, removed == live_overrides::removal::removed ? "{\"deleted\": true}\n"
                                                                            : "{\"deleted\": \"sent to the fleet\"}\n");
}

}  // namespace

void answer_api(const admin_view& view, const admin_request& req, admin_response& res) {
    const std::string_view target = req.target();
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
    page_query q;
    if (path == "/api/clients") {
        if (!get) return error(res, http::status::method_not_allowed, "", "only GET here");
        return json(res, http::status::ok, render_clients_json(view.gates));
    }
    if (path == "/api/hosts" || path == "/api/overrides") {
        if (!get) return error(res, http::status::method_not_allowed, "", "only GET here");
        if (!read_query(target, q, res)) return;
        return path == "/api/hosts" ? list_hosts(view, q, res) : list_overrides(view, q, res);
    }
    constexpr std::string_view prefix = "/api/hosts/";
    if (!path.starts_with(prefix)) return error(res, http::status::not_found, "", "no such API: see SPEC.md's Admin API");
    std::string_view rest = path.substr(prefix.size());
    constexpr std::string_view suffix = "/override";
    const bool override_path = rest.ends_with(suffix);
    if (override_path) rest.remove_suffix(suffix.size());
    std::string key;
    if (!gate_key_of(view, rest, key, res)) return;
    if (!override_path) {
        if (!get) return error(res, http::status::method_not_allowed, "", "only GET here");
        return one_host(view, key, res);
    }
    if (req.method() == http::verb::put) return put_override(view, key, req, res);
    if (req.method() == http::verb::delete_) return delete_override(view, key, req, res);
    if (get) {
        if (auto live = view.overrides.find(key)) return json(res, http::status::ok, to_json(*live) + "\n");
        return error(res, http::status::not_found, "", "no override of " + key);
    }
    res.set(http::field::allow, "GET, PUT, DELETE");
    error(res, http::status::method_not_allowed, "", "GET, PUT or DELETE here");
}

}  // namespace politeproxy
