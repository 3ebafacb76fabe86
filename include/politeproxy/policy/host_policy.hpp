#pragma once
// What applies to one host key, as the gate, the health controller and the forwarding
// read it: `defaults`, or defaults with a `hosts:` override on top. Plain values; the
// config (config/config.hpp) holds one per override and parses them (SPEC.md).
#include "politeproxy/base/clock.hpp"
#include "politeproxy/policy/throttle_signals.hpp"

#include <chrono>
#include <cstddef>

namespace politeproxy {

using namespace std::chrono_literals;

struct queue_config {
    std::size_t max_waiting = 1000;
    clock::duration max_wait = 60s;
};

struct adaptive_config {
    bool enabled = true;
    std::size_t hard_max = 4;
    clock::duration grow_interval = 30s;
};

struct backoff_config {
    clock::duration initial = 5s;
    clock::duration max = 10min;
    clock::duration forgive_after = 2min;  // see adaptive_limit_sim_test: a throttling host escalates, capacity changes do not
    double jitter = 0.1;
};

struct timeouts_config {
    clock::duration connect = 10s;
    clock::duration response_headers = 60s;
    clock::duration idle = 60s;
};

/// How requests go to a host's origins (`upstream_protocol`).
enum class upstream_protocol {
    automatic,  ///< `auto`: HTTP/2 when the origin picks h2 by ALPN over TLS, else HTTP/1.1
    http1,      ///< HTTP/1.1 only (ALPN offers http/1.1 alone)
    h2c,        ///< HTTP/2 with prior knowledge over plain TCP (TLS origins as `auto`)
};
inline const char* name_of(upstream_protocol p) {
    switch (p) {
    case upstream_protocol::automatic: return "auto";
    case upstream_protocol::http1: return "http1";
    case upstream_protocol::h2c: return "h2c";
    }
    return "auto";
}

/// Everything that applies to one host key: `defaults`, or defaults with an override on top.
struct host_policy {
    std::size_t concurrency = 2;
    double rate = 1.0;
    double burst = 1.0;
    queue_config queue;
    adaptive_config adaptive;
    backoff_config backoff;
    clock::duration retry_after_cap = 1h;
    throttle_signals throttle;  ///< what in an answer says "slow down"
    bool enforce = true;
    upstream_protocol upstream = upstream_protocol::automatic;
    timeouts_config timeouts;
};

}  // namespace politeproxy
