#pragma once
#include "politeproxy/base/clock.hpp"
#include "politeproxy/base/time_source.hpp"
#include "politeproxy/base/error.hpp"
#include "politeproxy/policy/outcome.hpp"
#include "politeproxy/exchange/permit.hpp"
#include "politeproxy/policy/host_policy.hpp"

#include <string>
#include <string_view>
#include <utility>

namespace politeproxy {

class metrics;
class logger;
class parent_state;

/// One request's trip from its admission at its host's gate to the end of the origin's
/// answer, in the terms every protocol shares: how it ended (requests_total), what the
/// origin's answer says about the host's health (latency, throttling with Retry-After,
/// refusal), the upstream latency metric, and the Proxy-Status its response carries.
///
/// The adapters (where a request comes from: an HTTP/1.1 client connection, plain or
/// inside intercepted TLS, later an HTTP/2 stream; how it reaches the origin: an
/// HTTP/1.1 connection from the pool, later an HTTP/2 stream) report each step here and
/// keep framing to themselves, so no protocol has a copy of the politeness rules.
///
/// Owns the request's slot: it goes back when the origin is done (origin_done), or when
/// the exchange is destroyed, on every path.
class exchange {
public:
    /// `key` must outlive the exchange (it names the host in debug logs).
    exchange(metrics& m, const logger& log, permit slot, std::string_view key)
        : metrics_(m), log_(log), slot_(std::move(slot)), time_(slot_.time()), key_(key) {}
    exchange(exchange&& o) noexcept
        : metrics_(o.metrics_), log_(o.log_), slot_(std::move(o.slot_)), parent_(std::exchange(o.parent_, nullptr)),
          tunneled_(o.tunneled_), outcome_(o.outcome_), time_(o.time_), key_(o.key_), sent_at_(o.sent_at_) {}
    exchange& operator=(exchange&&) = delete;
    /// Counts the request in its parent's parent_requests_total, if one carried it.
    ~exchange();

    /// The request goes through `parent` (a parent proxy) from now on; null: direct.
    /// `tunneled`: inside a tunnel through it (CONNECT), to the origin itself. A failure to
    /// reach the parent, or to hear from it when it is the request's HTTP peer (plain
    /// HTTP), is the parent's (parent_health), not the destination's; what it answers about
    /// the destination (its 502, 503, 504; a CONNECT it could not open) is the
    /// destination's, and inside its tunnel everything is as it would be direct.
    void through(parent_state* parent, bool tunneled) {
        parent_ = parent;
        tunneled_ = tunneled;
    }
    parent_state* parent() const { return parent_; }
    /// RFC 9209 next-hop of its answers: the parent's name, empty when direct.
    std::string_view next_hop() const;

    const host_policy& policy() const { return slot_.policy(); }
    clock::duration queue_wait() const { return slot_.queue_wait(); }

    /// No connection to the origin (`why`: DNS, refused, connect timeout, ...). Through a
    /// parent: its word about the destination (origin_refused_by_parent) is the
    /// destination's; its refusals and what failed inside its tunnel are nobody's.
    void connect_failed(errc why);
    /// The parent itself failed (exchange/parent_requests.hpp: parent_failure): its
    /// health hears of it (`what` for the log), the destination's does not.
    void parent_failed(errc why, std::string_view what);
    /// The client's part broke off or was malformed: nothing said about the origin.
    void client_failed();
    /// The request starts going out now: the latency clock starts (again, on a retry).
    void request_sent() { sent_at_ = time_.now(); }
    /// The origin closed or reset the connection while the request was going out.
    void request_refused();
    /// No response header (`why`: origin_response_timeout, origin_closed, origin_bad_response).
    void response_failed(errc why);
    /// The response header arrived: its status and fields (`field_value(name)`: the first
    /// value of the field `name`, given in lower case; empty when absent) and its latency
    /// tell the host's health: throttled when policy().throttle hears "slow down" in them
    /// (with the Retry-After field's text), answered otherwise.
    template <class FieldValue>
    void response_arrived(unsigned status, FieldValue&& field_value, std::string_view method, bool pooled) {
        const bool throttled = policy().throttle.heard(status, field_value);
        record_response(status, throttled, throttled ? std::string_view(field_value("retry-after")) : std::string_view(),
                       method, pooled);
    }
    /// The parent answered 407 to the proxy's own credentials (a configuration error,
    /// logged once per parent): nothing said about the destination.
    void parent_refused_credentials();
    /// No turn at the parent (max_connections) within queue.max_wait: rejected, like a
    /// request that waited too long for its host.
    void parent_busy() { set(outcome::rejected); }
    /// The response body could not be relayed whole.
    void body_failed(bool timed_out) { set(timed_out ? outcome::timeout : outcome::error); }
    /// A CONNECT tunnel is open: as a request, it went well (its slot is held until it closes).
    void tunnel_opened();
    /// The origin is done with the request: its slot goes back now.
    void origin_done() { slot_.reset(); }

    /// Appends the Proxy-Status entry for a response from the origin
    /// ("politeproxy; queue-wait=0.012").
    void append_proxy_status(std::string& out) const;

private:
    void record_response(unsigned status, bool throttled, std::string_view retry_after, std::string_view method,
                        bool pooled);

    void set(outcome o) {
        slot_.set_outcome(o);
        outcome_ = o;
    }

    metrics& metrics_;
    const logger& log_;
    permit slot_;
    parent_state* parent_ = nullptr;
    bool tunneled_ = false;
    outcome outcome_ = outcome::error;
    time_source time_;  ///< the gates' (base/time_source.hpp)
    std::string_view key_;
    clock::time_point sent_at_ = time_.now();
};

/// How a request that failed with `why` counts in requests_total.
outcome outcome_of(errc why);

/// Appends "politeproxy; queue-wait=S.mmm", the Proxy-Status entry of a forwarded response,
/// and `; next-hop="NAME"` when a parent carried it.
void append_queue_wait_status(clock::duration waited, std::string& out, std::string_view next_hop = {});

}  // namespace politeproxy
