#pragma once
// The counter sink every layer records into: each metric family politeproxy exports
// (names: SPEC.md "Metrics") that is counted as things happen, declared in one place and
// handed to components by reference. Per-host series are not here: admin/'s
// metrics_renderer reads them from the gates at scrape time, so they vanish when a gate
// is evicted and cost nothing per request.
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/error.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
struct MetricFamily;
}

namespace politeproxy {

/// Every metric's name starts with this.
inline constexpr const char* metric_prefix = "politeproxy_";

enum class connection_side { client, origin };
enum class connection_protocol { http1, http2, tunnel };
enum class connect_mode { intercepted, tunneled };
/// What a DNS look-up of one name came to (dns_queries_total's result label).
enum class dns_result { ok, nxdomain, error, stale };
/// How one connect attempt to one address ended (connect_attempts_total's result label):
/// it connected, failed (refused, unreachable), timed out, or was abandoned because
/// another address of the host connected first (Happy Eyeballs).
enum class attempt_result { ok, failed, timeout, abandoned };

class metrics {
public:
    /// `h2_refusal_reasons`: the reason labels of h2_streams_refused_total (the HTTP/2
    /// layer's abuse guards), each exported from the start, at 0.
    explicit metrics(std::span<const std::string_view> h2_refusal_reasons = {});
    ~metrics();
    metrics(const metrics&) = delete;
    metrics& operator=(const metrics&) = delete;

    /// rejected_total{reason}: a request the proxy refused (queue, policy, bad input).
    /// Other errcs (origin failures) are not refusals and are not counted here.
    void rejected(errc reason);
    /// h2_streams_refused_total{reason}: an HTTP/2 abuse guard acted; `reason` is the
    /// index of its label among those given at construction.
    void h2_refused(std::size_t reason);
    /// config_reloads_total{result}.
    void config_reload(bool ok);
    /// queue_wait_seconds: time from parking to departure.
    void queue_wait(clock::duration d);
    /// upstream_response_seconds: time from sending to the origin's response headers.
    void origin_response(clock::duration d);
    /// client_connections / upstream_connections{protocol}.
    void connection_opened(connection_side side, connection_protocol protocol);
    void connection_closed(connection_side side, connection_protocol protocol);
    /// connect_total{mode}: a CONNECT that passed its checks, intercepted or tunneled.
    void connect_served(connect_mode mode);
    /// tls_leaf_certificates_total{result}: a leaf an intercepted handshake used,
    /// `minted` for it or `cached`.
    void leaf_certificate(bool minted);

    /// The fleet store's families (fleet_store_up, fleet_round_trip_seconds,
    /// fleet_lease_lost_total, fleet_degraded_seconds_total): exported only with a fleet.
    void enable_fleet();
    /// fleet_store_up: 1 while the store answers.
    void fleet_store(bool up);
    /// fleet_round_trip_seconds: one acquire, from the worker's point of view.
    void fleet_round_trip(clock::duration d);
    /// fleet_lease_lost_total: leases the store no longer had when renewed or re-asserted.
    void fleet_leases_lost(std::size_t n);
    /// fleet_degraded_seconds_total: time spent without the store (local_share or fail_closed).
    void fleet_degraded(clock::duration d);

    /// dns_queries_total{result}, and dns_lookup_seconds for a look-up that asked DNS
    /// (`took`; a stale answer served counts only in the total).
    void dns_query(dns_result result, clock::duration took);
    /// dns_cache_entries: names cached.
    void dns_cache_entries(std::size_t n);
    /// connect_attempts_total{family,result}.
    void connect_attempt(bool ipv6, attempt_result result);

    /// user_requests_total{user}: a request authenticated under this proxy user at the
    /// edge (metrics.per_user): a CONNECT counts once for everything inside it.
    void user_request(const std::string& user);

    /// What has been counted, for the renderer (admin/metrics_renderer.hpp); the
    /// latency histograms, counted without a lock, are brought up to date first.
    std::vector<prometheus::MetricFamily> collect() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Counts one open connection for as long as it lives.
class connection_tracker {
public:
    connection_tracker(metrics& m, connection_side side, connection_protocol protocol)
        : m_(&m), side_(side), protocol_(protocol) {
        m_->connection_opened(side_, protocol_);
    }
    connection_tracker(const connection_tracker&) = delete;
    connection_tracker& operator=(const connection_tracker&) = delete;
    ~connection_tracker() { m_->connection_closed(side_, protocol_); }

private:
    metrics* m_;
    connection_side side_;
    connection_protocol protocol_;
};

}  // namespace politeproxy
