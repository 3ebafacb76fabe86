#include "politeproxy/exchange/exchange.hpp"

#include "politeproxy/base/metrics.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/policy/adaptive_limit.hpp"
#include "politeproxy/policy/retry_after.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/exchange/parent_set.hpp"

#include <charconv>
#include <chrono>

namespace politeproxy {

namespace {

long long whole_ms(clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

exchange::~exchange() {
    if (parent_) parent_->count(outcome_);
}

std::string_view exchange::next_hop() const { return parent_ ? std::string_view(parent_->name()) : std::string_view(); }

void exchange::connect_failed(errc why) {
    set(outcome_of(why));
    if (parent_) {  // its word about the destination, or nobody's (its refusals, what failed in its tunnel)
        if (why == errc::origin_refused_by_parent) slot_.report(health_signal::refused_connection());
        else if (why == errc::parent_credentials_refused) parent_->refused_credentials(log_);
        return;
    }
    if (why == errc::origin_refused) slot_.report(health_signal::refused_connection());
}

void exchange::parent_failed(errc why, std::string_view what) {
    set(outcome_of(why));
    parent_->failed(log_, what);
}

void exchange::client_failed() { set(outcome::error); }

void exchange::request_refused() {
    set(outcome::refused);
    if (parent_ && !tunneled_)
        parent_->failed(log_, "closed the connection while receiving a request");
    else
        slot_.report(health_signal::refused_connection());
}

void exchange::parent_refused_credentials() {
    set(outcome::error);
    if (parent_) parent_->refused_credentials(log_);
}

void exchange::tunnel_opened() {
    set(outcome::ok);
    if (parent_) parent_->answered();
}

void exchange::response_failed(errc why) {
    set(outcome_of(why));
    // Closed or malformed without an answer where the parent is the HTTP peer: its own
    // failure (it says 502 for an origin that failed it). Silence is the destination's:
    // a parent waits for a slow origin as long as it may.
    if (parent_ && !tunneled_ && why != errc::origin_response_timeout) {
        parent_->failed(log_, make_error_code(why).message());
        return;
    }
    if (why == errc::origin_response_timeout)  // the slowest answer there is
        slot_.report(health_signal::answered(time_.now() - sent_at_));
    else if (why == errc::origin_closed)
        slot_.report(health_signal::refused_connection());
}

void exchange::record_response(unsigned status, bool throttled, std::string_view retry_after, std::string_view method,
                              bool pooled) {
    const auto latency = time_.now() - sent_at_;
    metrics_.origin_response(latency);
    if (log_.enabled(log_level::debug))
        log_.write(log_level::debug, "forward",
                   std::string(method) + " " + std::string(key_) + " -> " + std::to_string(status) + " in " +
                       std::to_string(whole_ms(latency)) + " ms after " + std::to_string(whole_ms(queue_wait())) +
                       " ms parked" + (pooled ? ", pooled connection" : ""));
    if (parent_) parent_->answered();
    if (parent_ && !tunneled_ && (status == 502 || status == 504)) {  // the parent could not reach the origin
        set(outcome::refused);
        slot_.report(health_signal::refused_connection());
        return;
    }
    set(throttled ? outcome::throttled : outcome::ok);
    if (throttled)
        slot_.report(health_signal::throttled_by(
            latency, parse_retry_after(retry_after, std::chrono::system_clock::now(), policy().retry_after_cap)));
    else
        slot_.report(health_signal::answered(latency));
}

void exchange::append_proxy_status(std::string& out) const { append_queue_wait_status(queue_wait(), out, next_hop()); }

outcome outcome_of(errc why) {
    switch (why) {
    case errc::dns_timeout:
    case errc::origin_connect_timeout:
    case errc::origin_response_timeout: return outcome::timeout;
    case errc::origin_refused:
    case errc::origin_refused_by_parent:
    case errc::origin_closed: return outcome::refused;
    case errc::queue_full:
    case errc::queue_timeout:
    case errc::parked_full:
    case errc::client_queue_full:
    case errc::shutting_down:
    case errc::fleet_unavailable:
    case errc::robots_disallowed:
    case errc::robots_unreachable:
    case errc::destination_denied: return outcome::rejected;
    default: return outcome::error;
    }
}

void append_queue_wait_status(clock::duration waited, std::string& out, std::string_view next_hop) {
    // "%.3f" seconds, without printf's floating-point path (this is on every response).
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited + std::chrono::microseconds(500)).count();
    out += "politeproxy; queue-wait=";
    char seconds[24];
    const auto [end, ec] = std::to_chars(seconds, seconds + sizeof seconds, ms / 1000);
    out.append(seconds, end);
    out += '.';
    const auto frac = ms % 1000;
    out += static_cast<char>('0' + frac / 100);
    out += static_cast<char>('0' + frac / 10 % 10);
    out += static_cast<char>('0' + frac % 10);
    if (!next_hop.empty()) ((out += "; next-hop=\"") += next_hop) += '"';  // a parent name: no quote or backslash
}

}  // namespace politeproxy
