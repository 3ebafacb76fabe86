"""The soak run's fixed parameters (the README documents them), the host names, the
body pattern of sized responses, and the proxy configuration files: the one it starts
with, the valid variants a reload switches between and the invalid files a reload must
reject."""

import harness as H

MAX_MINUTES = 10.0
TEARDOWN_BUDGET = 60.0        # hard limit = --minutes + this
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
