"""The soak run's fixed parameters (the README documents them), the host names, the
body pattern of sized responses, and the proxy configuration files: the one it starts
with, the valid variants a reload switches between and the invalid files a reload must
reject."""

import harness as H

MAX_MINUTES = 10.0
TEARDOWN_BUDGET = 75.0        # hard limit = --minutes + this
SAMPLE_EVERY = 5.0
RELOAD_EVERY = 20.0
SETTLE_MAX = 15.0
FD_SLACK = 4                  # see the README: lazily created, long-lived descriptors
RSS_BOUND_FRACTION = 0.10     # RSS growth bound: max(10 %, 5 MiB)
RSS_BOUND_KIB = 5 * 1024
CLIENT_MAX = 40
SCENARIO_BUDGET = 25.0        # one scenario (one connection) never runs longer
IDLE = 3.0                    # timeouts.idle (seconds) in the proxy config
RESPONSE_HEADERS = 2.0        # timeouts.response_headers
MAX_WAIT = 8.0                # queue.max_wait

N_HOSTS = 20
HOSTS = ["h%02d.test" % i for i in range(N_HOSTS)]
HEALTHY = HOSTS[:14]          # only normal traffic is aimed at these
THROTTLED = HOSTS[14:17]      # also get 429/503 (+ Retry-After) from the origin
FAULTY = HOSTS[17:]           # also get the raw fault origin's answers
N_EPHEMERAL = 300             # eNNN.test: gates created and evicted (host_idle_ttl 15s)
HOST_IDLE_TTL = "15s"

PATTERN = b"0123456789abcdef"  # origin.py's body for ?size=N

# The desync origin (desync_origin.py): shared hosts get every misbehaviour that is
# decided on the connection it happens on; each client thread has a host of its own
# ("late" host) for stray bytes sent 0.05-0.2 s after a bodiless answer, so that no other
# request can take that connection before the bytes are there (see the README).
DESYNC_SHARED = ["d%02d.test" % i for i in range(4)]
STRAY_DELAY = (0.05, 0.2)     # late stray bytes / body after the bodiless answer
LATE_WAIT = 1.5               # a client waits this long at most for its late stray bytes
LATE_MARGIN = 0.1             # then this long for the proxy to notice them
# Markers in every stray byte the desync origin sends: no client may ever see one.
EVIL_MARK = b"EVIL-5f3c9a"
STRAY_MARK = b"STRAY-5f3c9a"
MARKERS = (EVIL_MARK, STRAY_MARK)

# The fleet (fleet.py): two more proxies sharing a redis-server, with TLS interception.
FLEET_HOSTS = ["f%02d.test" % i for i in range(6)]   # plain HTTP/1.1 to origin.py
TLS_HOSTS = ["t%02d.test" % i for i in range(4)]     # CONNECT + TLS to the TLS origin
FLEET_MODES = [("fleet-a", "local_share"), ("fleet-b", "fail_closed")]
OUTAGE_AT = 0.4               # the store is killed at this share of the load ...
OUTAGE_FOR = 10.0             # ... and started again (same port, empty) this much later
OUTAGE_SLACK = 6.0            # after the restart: reconnect backoff (<= 2 s) and a request


def late_host(thread_name):
    """The late host of a client thread ('client-7' -> 'dl07.test')."""
    return "dl%02d.test" % int(thread_name.rsplit("-", 1)[-1])


def pattern(n):
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def make_config(echo_port, concurrency=2, rate=50, burst=20, max_wait=MAX_WAIT,
                overrides=None):
    cfg = H.base_config(
        hosts=overrides or {},
        concurrency=concurrency, rate=rate, burst=burst,
        queue={"max_waiting": 40, "max_wait": "%gs" % max_wait},
        timeouts={"connect": "2s", "response_headers": "%gs" % RESPONSE_HEADERS,
                  "idle": "%gs" % IDLE},
        adaptive={"enabled": True, "hard_max": 4, "grow_interval": "5s"},
        backoff={"initial": "200ms", "max": "2s", "forgive_after": "10s", "jitter": 0},
        retry_after_cap="2s")
    cfg["limits"] = {"host_idle_ttl": HOST_IDLE_TTL}
    cfg["security"]["connect_ports"] = [443, echo_port]
    return cfg


def fleet_config(store_url, mode, tls_port, ca_cert, ca_key, upstream_ca):
    """A fleet proxy: the soak's defaults (no reloads), the fleet store, TLS intercept."""
    cfg = make_config(tls_port)
    cfg["security"]["connect_ports"] = [tls_port]
    cfg["fleet"] = {"redis": store_url, "lease_ttl": "3s", "expected_workers": 2,
                    "on_store_failure": mode, "timeout": "1s"}
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key,
                  "upstream_ca_file": upstream_ca}
    return cfg


VALID_VARIANTS = [
    dict(concurrency=3, rate=80, burst=20),
    dict(concurrency=2, rate=40, burst=10, max_wait=6.0),
    dict(concurrency=2, rate=60, burst=20,
         overrides={"h05.test": {"concurrency": 1}}),
    dict(concurrency=3, rate=50, burst=30,
         overrides={"h06.test": {"concurrency": 4, "rate": 100,
                                 "reason": "soak test: raised on purpose"}}),
    dict(concurrency=2, rate=50, burst=20),
]


def invalid_config_text(echo_port, n):
    """n-th invalid file: each is rejected by the loader for a different reason.
    Returns (YAML text, what is wrong with it)."""
    kind = n % 5
    cfg = make_config(echo_port)
    if kind == 0:
        cfg["defaults"]["no_such_key"] = 7
    elif kind == 1:
        cfg["defaults"]["concurrency"] = 0
    elif kind == 2:
        cfg["defaults"]["timeouts"]["idle"] = "5"          # a duration without unit
    elif kind == 3:
        return "defaults: [unclosed\n  concurrency: 2\n", "YAML syntax error"
    else:
        cfg["hosts"] = {"h06.test": {"concurrency": 9}}    # raised without a reason
    return H.dump_config(cfg), ["unknown key", "concurrency 0", "duration without unit",
                                "YAML syntax error", "raise without reason"][kind]
