"""The load: every scenario on one object (Soak), their weights in the mix (SCENARIOS),
and the client threads that run them until the load ends (client_loop, start_clients,
join_clients)."""

import random
import threading
import time
import traceback

from scenarios_aborts import AbortScenarios
from scenarios_desync import DesyncScenarios
from scenarios_fleet import FleetScenarios
from scenarios_h2c import H2cScenarios
from scenarios_http import HttpScenarios
from scenarios_tunnels import TunnelScenarios
from soak_config import SCENARIO_BUDGET


class Soak(HttpScenarios, AbortScenarios, TunnelScenarios, DesyncScenarios, H2cScenarios,
           FleetScenarios):
    """All the scenarios (scn_NAME methods) over one shared ScenarioBase state."""


SCENARIOS = [  # (name, weight)
    ("get", 30), ("slow", 6), ("slow_reader", 2), ("head", 5), ("post_cl", 7), ("put_chunked", 6),
    ("expect100", 2), ("keepalive", 10), ("throttle", 5), ("fault", 7), ("ephemeral", 3),
    ("abort_header", 4), ("abort_body", 3), ("abort_parked", 4), ("abort_response", 4),
    ("connect", 5), ("connect_denied", 1),
    ("desync", 10), ("desync_late", 4), ("h2c", 6), ("fleet", 5), ("tls", 5),
]


def client_loop(soak, idx, seed):
    rng = random.Random(seed * 1000 + idx)
    names = [n for n, _ in SCENARIOS]
    weights = [w for _, w in SCENARIOS]
    while not soak.stop.is_set() and time.monotonic() < soak.load_end:
        name = rng.choices(names, weights)[0]
        t0 = time.monotonic()
        try:
            getattr(soak, "scn_" + name)(rng)
        except OSError as e:     # connect() to the proxy itself failed
            soak.tally.record(name, "conn-error:connect", fail="could not reach the proxy",
                              detail="%s: %s" % (type(e).__name__, e))
            time.sleep(0.2)
        except Exception:  # noqa: BLE001 - a bug of ours; counted, the loop goes on
            soak.tally.note_fail("soak client exception", traceback.format_exc()[-600:])
            time.sleep(0.2)
        soak.tally.ran(name, time.monotonic() - t0)
        # a little think time keeps the load steady instead of CPU-bound
        time.sleep(rng.uniform(0.0, 0.03))


def start_clients(soak, n, seed):
    workers = [threading.Thread(target=client_loop, args=(soak, i, seed),
                                daemon=True, name="client-%d" % i)
               for i in range(n)]
    for w in workers:
        w.start()
    return workers


def join_clients(workers, t_stop):
    """Wait for the clients (each scenario ends within SCENARIO_BUDGET); returns the
    names of those still running."""
    join_end = t_stop + SCENARIO_BUDGET + 2
    for w in workers:
        w.join(max(0.0, join_end - time.monotonic()))
    return [w.name for w in workers if w.is_alive()]
