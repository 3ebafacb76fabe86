#include "politeproxy/admin/metrics_renderer.hpp"

#include "politeproxy/policy/live_override.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/exchange/host_gates.hpp"
#include "politeproxy/exchange/parent_set.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <limits>
#include <sstream>
#include <vector>

namespace politeproxy {
namespace {

prometheus::MetricFamily metric_family(const char* name, const char* help, prometheus::MetricType type) {
    prometheus::MetricFamily f;
    f.name = std::string(metric_prefix) + name;
    f.help = help;
    f.type = type;
    return f;
}

void add_sample(prometheus::MetricFamily& f, std::vector<prometheus::ClientMetric::Label> labels, double v) {
    prometheus::ClientMetric m;
    m.label = std::move(labels);
    if (f.type == prometheus::MetricType::Counter) m.counter.value = v;
    else m.gauge.value = v;
    f.metric.push_back(std::move(m));
}

// parent_up, parent_connections, parent_requests_total, parent_connect_seconds (SPEC.md).
void add_parent_families(const parent_set& parents, std::vector<prometheus::MetricFamily>& families) {
    using prometheus::MetricType;
    const auto all = parents.parents();
    if (all.empty()) return;
    auto up = metric_family("parent_up", "1 while the parent proxy is up (not marked down)", MetricType::Gauge);
    auto busy = metric_family("parent_connections", "Requests and tunnels the parent proxy carries now", MetricType::Gauge);
    auto requests = metric_family("parent_requests_total", "Requests through the parent proxy by outcome", MetricType::Counter);
    auto connect = metric_family("parent_connect_seconds", "Time to connect to the parent proxy", MetricType::Histogram);
    for (const auto& p : all) {
        add_sample(up, {{"parent", p->name()}}, p->up() ? 1 : 0);
        add_sample(busy, {{"parent", p->name()}}, static_cast<double>(p->busy()));
        const auto counts = p->snapshot();
        for (std::size_t o = 0; o < outcome_count; ++o)
            add_sample(requests, {{"parent", p->name()}, {"outcome", std::string(outcome_name(static_cast<outcome>(o)))}},
                       static_cast<double>(counts.requests[o]));
        prometheus::ClientMetric m;
        m.label = {{"parent", p->name()}};
        m.histogram.sample_count = counts.connects;
        m.histogram.sample_sum = counts.connect_seconds;
        const auto bounds = parent_state::connect_bucket_bounds();
        for (std::size_t i = 0; i < bounds.size(); ++i)
            m.histogram.bucket.push_back({counts.connect_buckets[i], bounds[i]});
        m.histogram.bucket.push_back({counts.connects, std::numeric_limits<double>::infinity()});
        connect.metric.push_back(std::move(m));
    }
    for (auto* f : {&up, &busy, &requests, &connect}) families.push_back(std::move(*f));
}

}  // namespace

std::string metrics_renderer::render(const metrics& counted, const host_gates& gates, const parent_set& parents,
                                     std::size_t idle_origin_connections,
                                     const std::vector<std::shared_ptr<const live_override>>& api_overrides) {
    using prometheus::MetricType;
    auto families = counted.collect();
    for (auto& f : families)
        if (f.name == std::string(metric_prefix) + "upstream_connections")
            for (auto& m : f.metric)
                if (!m.label.empty() && m.label[0].value == "http1")
                    m.gauge.value += static_cast<double>(idle_origin_connections);
    const auto cfg = gates.current_config();

    auto in_flight = metric_family("host_in_flight", "Requests in flight to the host", MetricType::Gauge);
    auto waiting = metric_family("host_waiting", "Requests parked for the host", MetricType::Gauge);
    auto limit = metric_family("host_concurrency_limit", "The host's current concurrency limit", MetricType::Gauge);
    auto rate = metric_family("host_rate_limit", "The host's token refill rate (tokens per second)", MetricType::Gauge);
    auto rate_from = metric_family("host_rate_source",
                                 "1 for where the host's rate comes from: config, adaptive (health or the fleet's share) "
                                 "or robots (its robots.txt Crawl-delay)",
                                 MetricType::Gauge);
    auto ceiling = metric_family("host_stream_ceiling",
                               "The host's HTTP/2 origin's SETTINGS_MAX_CONCURRENT_STREAMS, a cap on its limit",
                               MetricType::Gauge);
    auto requests = metric_family("requests_total", "Requests by host and outcome", MetricType::Counter);
    auto paused = metric_family("host_paused_seconds", "Seconds until the host's pause (Retry-After or backoff) ends",
                              MetricType::Gauge);
    auto changes = metric_family("limit_changes_total", "Adaptive concurrency limit changes by host and direction",
                               MetricType::Counter);
    auto would_wait = metric_family("would_have_waited_total",
                                  "Requests forwarded at once in observe-only mode that the limits would have parked",
                                  MetricType::Counter);
    auto fleet_in_flight = metric_family("host_fleet_in_flight",
                                       "Leases the host holds across the fleet, at the store's last answer",
                                       MetricType::Gauge);
    constexpr const char* directions[limit_change_count] = {"up", "down", "collapse"};

    // Past metrics.max_host_series the rest are summed as "_other" (host_series: who keeps
    // a name). Every host gives a row of its counters; only the named ones a snapshot.
    series_.begin_scrape();
    auto rows = gates.series_rows();
    const auto picked = series_.pick(rows, cfg->max_host_series);
    std::vector<std::string> named_keys;
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (picked.named[i]) named_keys.push_back(rows[i].key);
    const std::size_t tracked_hosts = rows.size();
    std::vector<host_series_row>().swap(rows);  // ~170 bytes a host: freed before the text is built
    // No per-client queues: no series of theirs. A named host evicted since its row has no
    // snapshot: its series ends (host_evicted).
    const auto named_hosts = gates.snapshot(named_keys, gates.time().now(), false);
    // What a named host and "_other" both have: their counters, in flight and waiting.
    auto add_counts = [&](const auto& h, bool named_host) {
        add_sample(in_flight, {{"host", h.key}}, static_cast<double>(h.in_flight));
        add_sample(waiting, {{"host", h.key}}, static_cast<double>(h.waiting));
        for (std::size_t d = 0; d < limit_change_count; ++d)
            add_sample(changes, {{"host", h.key}, {"direction", directions[d]}}, static_cast<double>(h.limit_changes[d]));
        if (!h.enforce || (!named_host && h.would_have_waited > 0))
            add_sample(would_wait, {{"host", h.key}}, static_cast<double>(h.would_have_waited));
        for (std::size_t o = 0; o < outcome_count; ++o)
            add_sample(requests, {{"host", h.key}, {"outcome", std::string(outcome_name(static_cast<outcome>(o)))}},
                       static_cast<double>(h.outcomes[o]));
    };
    for (const host_snapshot& h : named_hosts) {
        add_counts(h, true);
        add_sample(limit, {{"host", h.key}}, static_cast<double>(h.limit));
        if (h.stream_ceiling) add_sample(ceiling, {{"host", h.key}}, static_cast<double>(*h.stream_ceiling));
        add_sample(rate, {{"host", h.key}}, h.rate);
        add_sample(rate_from, {{"host", h.key}, {"source", std::string(name_of(h.rate_from))}}, 1);
        if (h.fleet_in_flight) add_sample(fleet_in_flight, {{"host", h.key}}, static_cast<double>(*h.fleet_in_flight));
        add_sample(paused, {{"host", h.key}}, std::chrono::duration<double>(h.paused_for).count());
    }
    if (picked.has_other) add_counts(picked.other, false);

    auto tracked = metric_family("hosts_tracked", "Host keys with state in memory", MetricType::Gauge);
    add_sample(tracked, {}, static_cast<double>(tracked_hosts));

    auto overrides = metric_family("host_override_info", "Active overrides (registry and control API) and their reasons",
                                 MetricType::Gauge);
    const auto today = utc_today();
    for (const auto& o : cfg->hosts)
        if (!o.expired(today)) add_sample(overrides, {{"host", o.pattern}, {"reason", o.reason}, {"source", "registry"}}, 1);
    // As many API overrides as a scrape has host series (metrics.max_host_series): no more.
    const std::size_t shown = std::min(api_overrides.size(), cfg->max_host_series);
    for (std::size_t i = 0; i < shown; ++i)
        add_sample(overrides, {{"host", api_overrides[i]->key}, {"reason", api_overrides[i]->reason}, {"source", "api"}}, 1);

    // Clients (clients:), capped by metrics.max_client_series like hosts.
    auto client_waiting = metric_family("client_waiting", "The client's requests waiting for a slot, all hosts",
                                      MetricType::Gauge);
    auto client_in_flight = metric_family("client_in_flight",
                                        "The client's requests holding a slot (at origins), all hosts", MetricType::Gauge);
    auto client_requests = metric_family("client_requests_total", "Requests by client and outcome", MetricType::Counter);
    if (cfg->clients) {
        client_series_.begin_scrape();
        const auto clients = gates.clients().snapshot();
        const auto named = client_series_.pick(clients, cfg->max_client_series);
        auto add_client = [&](const client_snapshot& c) {
            add_sample(client_waiting, {{"client", c.key}}, static_cast<double>(c.waiting));
            add_sample(client_in_flight, {{"client", c.key}}, static_cast<double>(c.in_flight));
            for (std::size_t o = 0; o < outcome_count; ++o)
                add_sample(client_requests,
                           {{"client", c.key}, {"outcome", std::string(outcome_name(static_cast<outcome>(o)))}},
                           static_cast<double>(c.outcomes[o]));
        };
        for (std::size_t i = 0; i < clients.size(); ++i)
            if (named.named[i]) add_client(clients[i]);
        if (named.has_other) add_client(named.other);
    }

    add_parent_families(parents, families);
    for (auto* f : {&in_flight, &waiting, &limit, &ceiling, &rate, &rate_from, &fleet_in_flight, &paused, &requests, &changes, &would_wait, &tracked,
                    &overrides, &client_waiting, &client_in_flight, &client_requests})
        families.push_back(std::move(*f));
    std::ostringstream out;
    prometheus::TextSerializer{}.Serialize(out, families);
    return out.str();
}

}  // namespace politeproxy
