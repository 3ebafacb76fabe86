#include "politeproxy/base/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <map>
#include <vector>

namespace politeproxy {
namespace {

constexpr const char* prefix = metric_prefix;

constexpr errc rejection_reasons[] = {
    errc::queue_full,          errc::queue_timeout,      errc::shutting_down,      errc::bad_host,
    errc::bad_request,         errc::header_too_large,   errc::unsupported_scheme,
    errc::origin_form_request, errc::client_denied,      errc::destination_denied,
    errc::connect_port_denied, errc::loop_detected,      errc::fleet_unavailable,  errc::proxy_auth_required,
    errc::auth_checks_busy,    errc::parked_full,        errc::client_connections_full, errc::robots_disallowed,
    errc::robots_unreachable,  errc::client_queue_full,
};

const char* reason_label(errc e) {
    switch (e) {
    case errc::queue_full: return "queue_full";
    case errc::queue_timeout: return "queue_timeout";
    case errc::bad_host: return "bad_host";
    case errc::shutting_down: return "shutting_down";
    case errc::bad_request: return "bad_request";
    case errc::header_too_large: return "header_too_large";
    case errc::unsupported_scheme: return "unsupported_scheme";
    case errc::origin_form_request: return "origin_form";
    case errc::client_denied: return "client_denied";
    case errc::proxy_auth_required: return "auth_required";
    case errc::auth_checks_busy: return "auth_busy";
    case errc::destination_denied: return "destination_denied";
    case errc::connect_port_denied: return "connect_port_denied";
    case errc::loop_detected: return "loop_detected";
    case errc::fleet_unavailable: return "fleet_unavailable";
    case errc::parked_full: return "max_parked";
    case errc::client_connections_full: return "max_client_connections";
    case errc::robots_disallowed: return "robots_disallowed";
    case errc::robots_unreachable: return "robots_unreachable";
    case errc::client_queue_full: return "client_max_waiting";
    default: return "other";
    }
}

// Latency buckets from 1 ms to 2 min: a crawl sees both fast APIs and tarpits.
constexpr std::array<double, 16> latency_bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                0.5,   1,      2.5,   5,    10,    30,   60,  120};
const prometheus::Histogram::BucketBoundaries latency_buckets(latency_bounds.begin(), latency_bounds.end());

// A latency histogram every request observes (twice), counted without a lock: the
// buckets and the sum (in nanoseconds) are relaxed atomic counters, folded into the
// prometheus::Histogram when the registry is read (metrics::collect), so a scrape sees
// every observation made before it. prometheus-cpp's Observe takes a mutex and updates
// doubles with compare-and-swap loops: most of a forwarded request's metrics cost. The
// buckets and the sum are taken one after the other, so an observation made meanwhile
// may show in a scrape's _sum before its _count (or the other way): the next scrape has
// both.
class lock_free_histogram {
public:
    explicit lock_free_histogram(prometheus::Histogram& target) : target_(target) {
        for (std::size_t i = 0; i < bucket_count; ++i)
            bounds_ns_[i] = static_cast<std::int64_t>(latency_bounds[i] * 1e9 + 0.5);
    }

    void observe(clock::duration d) {
        const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
        std::size_t i = 0;  // the first bucket whose bound is at least the value (le), or +Inf
        while (i < bounds_ns_.size() && bounds_ns_[i] < ns) ++i;
        counts_[i].fetch_add(1, std::memory_order_relaxed);
        sum_ns_.fetch_add(ns, std::memory_order_relaxed);
    }

    /// Moves what was counted since the last fold into the prometheus histogram.
    void fold() {
        std::vector<double> increments(counts_.size());
        bool any = false;
        for (std::size_t i = 0; i < counts_.size(); ++i) {
            increments[i] = static_cast<double>(counts_[i].exchange(0, std::memory_order_relaxed));
            any = any || increments[i] > 0;
        }
        const auto sum_ns = sum_ns_.exchange(0, std::memory_order_relaxed);
        if (any || sum_ns != 0) target_.ObserveMultiple(increments, static_cast<double>(sum_ns) * 1e-9);
    }

private:
    static constexpr std::size_t bucket_count = latency_bounds.size();
    prometheus::Histogram& target_;
    std::array<std::int64_t, bucket_count> bounds_ns_{};
    std::array<std::atomic<std::uint64_t>, bucket_count + 1> counts_{};
    std::atomic<std::int64_t> sum_ns_{0};
};

}  // namespace

struct metrics::impl {
    prometheus::Registry registry;
    prometheus::Family<prometheus::Counter>& user_requests =
        prometheus::BuildCounter().Name(std::string(prefix) + "user_requests_total")
            .Help("Requests authenticated at the edge under each proxy user (a CONNECT counts once)").Register(registry);
    prometheus::Family<prometheus::Counter>& rejected_family =
        prometheus::BuildCounter().Name(std::string(prefix) + "rejected_total")
            .Help("Requests the proxy refused or answered itself, by reason").Register(registry);
    std::map<errc, prometheus::Counter*> rejected;
    prometheus::Family<prometheus::Counter>& h2_refused_family =
        prometheus::BuildCounter().Name(std::string(prefix) + "h2_streams_refused_total")
            .Help("HTTP/2 streams refused or connections ended by an abuse guard, by reason").Register(registry);
    std::vector<prometheus::Counter*> h2_refused;  ///< by the reason's index, fixed at construction
    lock_free_histogram queue_wait{
        prometheus::BuildHistogram().Name(std::string(prefix) + "queue_wait_seconds")
            .Help("Time a request waited for its slot and token").Register(registry)
            .Add({}, latency_buckets)};
    lock_free_histogram origin_response{
        prometheus::BuildHistogram().Name(std::string(prefix) + "upstream_response_seconds")
            .Help("Time from sending a request to the origin's response headers").Register(registry)
            .Add({}, latency_buckets)};
    prometheus::Family<prometheus::Gauge>& client_connections =
        prometheus::BuildGauge().Name(std::string(prefix) + "client_connections")
            .Help("Open client connections, by protocol").Register(registry);
    prometheus::Family<prometheus::Gauge>& origin_connections =
        prometheus::BuildGauge().Name(std::string(prefix) + "upstream_connections")
            .Help("Open connections to origins (pooled included), by protocol").Register(registry);

    prometheus::Family<prometheus::Counter>& reloads =
        prometheus::BuildCounter().Name(std::string(prefix) + "config_reloads_total")
            .Help("Configuration reloads (SIGHUP) by result").Register(registry);
    prometheus::Counter& reload_ok = reloads.Add({{"result", "success"}});
    prometheus::Counter& reload_failed = reloads.Add({{"result", "failure"}});

    prometheus::Family<prometheus::Counter>& connects =
        prometheus::BuildCounter().Name(std::string(prefix) + "connect_total")
            .Help("CONNECT requests served, by mode (intercepted, tunneled)").Register(registry);
    prometheus::Counter& connect_intercepted = connects.Add({{"mode", "intercepted"}});
    prometheus::Counter& connect_tunneled = connects.Add({{"mode", "tunneled"}});

    prometheus::Family<prometheus::Counter>& leaves =
        prometheus::BuildCounter().Name(std::string(prefix) + "tls_leaf_certificates_total")
            .Help("Leaf certificates intercepted handshakes used, minted or from the cache").Register(registry);
    prometheus::Counter& leaf_minted = leaves.Add({{"result", "minted"}});
    prometheus::Counter& leaf_cached = leaves.Add({{"result", "cached"}});

    prometheus::Family<prometheus::Counter>& dns_queries =
        prometheus::BuildCounter().Name(std::string(prefix) + "dns_queries_total")
            .Help("Name look-ups that asked DNS, by result (ok, nxdomain, error, stale: an expired answer served "
                  "because its refresh failed)").Register(registry);
    std::array<prometheus::Counter*, 4> dns_results{&dns_queries.Add({{"result", "ok"}}),
                                                    &dns_queries.Add({{"result", "nxdomain"}}),
                                                    &dns_queries.Add({{"result", "error"}}),
                                                    &dns_queries.Add({{"result", "stale"}})};
    // A cached name costs nothing; a look-up is a round trip to the resolver, or its timeout.
    prometheus::Histogram& dns_lookup =
        prometheus::BuildHistogram().Name(std::string(prefix) + "dns_lookup_seconds")
            .Help("Time for one look-up of a name that was not cached (both families asked)").Register(registry)
            .Add({}, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                              0.25, 0.5, 1, 2.5, 5, 10});
    prometheus::Gauge& dns_entries = prometheus::BuildGauge().Name(std::string(prefix) + "dns_cache_entries")
                                         .Help("Names in the DNS cache").Register(registry).Add({});
    prometheus::Family<prometheus::Counter>& connect_attempts =
        prometheus::BuildCounter().Name(std::string(prefix) + "connect_attempts_total")
            .Help("Connect attempts to an origin's addresses, by family (ipv4, ipv6) and result (ok, failed, "
                  "timeout, abandoned: another address connected first)").Register(registry);
    std::array<std::array<prometheus::Counter*, 4>, 2> attempts{};  // [ipv6][result]

    // Fixed label sets, resolved once: no map look-up per connection.
    prometheus::Gauge& client_http1 = client_connections.Add({{"protocol", "http1"}});
    prometheus::Gauge& client_http2 = client_connections.Add({{"protocol", "http2"}});
    prometheus::Gauge& origin_http1 = origin_connections.Add({{"protocol", "http1"}});
    prometheus::Gauge& origin_http2 = origin_connections.Add({{"protocol", "http2"}});
    prometheus::Gauge& origin_tunnel = origin_connections.Add({{"protocol", "tunnel"}});

    // The fleet's, built by enable_fleet().
    prometheus::Gauge* fleet_up = nullptr;
    prometheus::Histogram* fleet_round_trip = nullptr;
    prometheus::Counter* fleet_lost = nullptr;
    prometheus::Counter* fleet_degraded = nullptr;

    explicit impl(std::span<const std::string_view> h2_refusal_reasons) {
        for (errc e : rejection_reasons) rejected[e] = &rejected_family.Add({{"reason", reason_label(e)}});
        for (std::string_view r : h2_refusal_reasons)
            h2_refused.push_back(&h2_refused_family.Add({{"reason", std::string(r)}}));
        for (int v6 = 0; v6 < 2; ++v6) {
            std::size_t i = 0;
            for (const char* result : {"ok", "failed", "timeout", "abandoned"})
                attempts[v6][i++] = &connect_attempts.Add({{"family", v6 ? "ipv6" : "ipv4"}, {"result", result}});
        }
    }

    prometheus::Gauge& connections(connection_side side, connection_protocol protocol) {
        if (side == connection_side::client) return protocol == connection_protocol::http2 ? client_http2 : client_http1;
        if (protocol == connection_protocol::http2) return origin_http2;
        return protocol == connection_protocol::tunnel ? origin_tunnel : origin_http1;
    }
};

metrics::metrics(std::span<const std::string_view> h2_refusal_reasons)
    : impl_(std::make_unique<impl>(h2_refusal_reasons)) {}
metrics::~metrics() = default;

void metrics::rejected(errc reason) {
    const auto it = impl_->rejected.find(reason);
    if (it != impl_->rejected.end()) it->second->Increment();
}

void metrics::h2_refused(std::size_t reason) {
    assert(reason < impl_->h2_refused.size() && "h2_refused: a reason not given at construction");
    if (reason < impl_->h2_refused.size()) impl_->h2_refused[reason]->Increment();
}

void metrics::config_reload(bool ok) { (ok ? impl_->reload_ok : impl_->reload_failed).Increment(); }

void metrics::queue_wait(clock::duration d) { impl_->queue_wait.observe(d); }

void metrics::origin_response(clock::duration d) { impl_->origin_response.observe(d); }

void metrics::connection_opened(connection_side side, connection_protocol protocol) {
    impl_->connections(side, protocol).Increment();
}

void metrics::connection_closed(connection_side side, connection_protocol protocol) {
    impl_->connections(side, protocol).Decrement();
}

void metrics::connect_served(connect_mode mode) {
    (mode == connect_mode::intercepted ? impl_->connect_intercepted : impl_->connect_tunneled).Increment();
}

void metrics::leaf_certificate(bool minted) { (minted ? impl_->leaf_minted : impl_->leaf_cached).Increment(); }

void metrics::enable_fleet() {
    if (impl_->fleet_up) return;
    auto& r = impl_->registry;
    impl_->fleet_up = &prometheus::BuildGauge().Name(std::string(prefix) + "fleet_store_up")
                           .Help("1 while the fleet store (Redis) answers, else 0").Register(r).Add({});
    // A store round trip is sub-millisecond on a LAN, and fleet.timeout at worst.
    impl_->fleet_round_trip = &prometheus::BuildHistogram().Name(std::string(prefix) + "fleet_round_trip_seconds")
                                   .Help("Time for one lease acquire at the fleet store").Register(r)
                                   .Add({}, prometheus::Histogram::BucketBoundaries{
                                                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                0.25, 0.5, 1, 2.5});
    impl_->fleet_lost = &prometheus::BuildCounter().Name(std::string(prefix) + "fleet_lease_lost_total")
                             .Help("Leases of running requests the fleet store had lost (expired or restarted), re-asserted")
                             .Register(r).Add({});
    impl_->fleet_degraded = &prometheus::BuildCounter().Name(std::string(prefix) + "fleet_degraded_seconds_total")
                                 .Help("Seconds spent without the fleet store (local_share or fail_closed)")
                                 .Register(r).Add({});
}

void metrics::dns_query(dns_result result, clock::duration took) {
    impl_->dns_results[static_cast<std::size_t>(result)]->Increment();
    if (result != dns_result::stale) impl_->dns_lookup.Observe(std::chrono::duration<double>(took).count());
}

void metrics::dns_cache_entries(std::size_t n) { impl_->dns_entries.Set(static_cast<double>(n)); }

void metrics::connect_attempt(bool ipv6, attempt_result result) {
    impl_->attempts[ipv6 ? 1 : 0][static_cast<std::size_t>(result)]->Increment();
}

void metrics::user_request(const std::string& user) {
    // One series per user of security.users_file: bounded by the file.
    impl_->user_requests.Add({{"user", user}}).Increment();
}

void metrics::fleet_store(bool up) {
    if (impl_->fleet_up) impl_->fleet_up->Set(up ? 1 : 0);
}

void metrics::fleet_round_trip(clock::duration d) {
    if (impl_->fleet_round_trip) impl_->fleet_round_trip->Observe(std::chrono::duration<double>(d).count());
}

void metrics::fleet_leases_lost(std::size_t n) {
    if (impl_->fleet_lost) impl_->fleet_lost->Increment(static_cast<double>(n));
}

void metrics::fleet_degraded(clock::duration d) {
    if (impl_->fleet_degraded) impl_->fleet_degraded->Increment(std::chrono::duration<double>(d).count());
}

std::vector<prometheus::MetricFamily> metrics::collect() const {
    impl_->queue_wait.fold();
    impl_->origin_response.fold();
    return impl_->registry.Collect();
}

}  // namespace politeproxy
