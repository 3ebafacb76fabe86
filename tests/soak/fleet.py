"""The fleet part of the soak (Fleet): a redis-server of the run's own on loopback
(tests/integration/redis_store.py), two more proxies that share it (fleet-a with
on_store_failure local_share, fleet-b with fail_closed) and intercept TLS with a CA from
--gen-ca, and a TLS origin (origin.py) whose self-signed certificate they trust. The
store is killed (SIGKILL) at OUTAGE_AT of the load and started again, empty, on the same
port OUTAGE_FOR seconds later (tick, from the monitor on the main thread).

judge_proxy_answer says what a proxy-made answer from a fleet proxy may be: the fleet's
503 (proxy_internal_error) only from fail_closed and only during the outage (plus
OUTAGE_SLACK after the restart), never from local_share; a 503 for a request parked
past max_wait from either."""

import ssl
import threading
import time

import harness as H
from redis_store import RedisStore
from soak_config import (FLEET_MODES, OUTAGE_AT, OUTAGE_FOR, OUTAGE_SLACK, TLS_HOSTS,
                         fleet_config)


class Edge:
    """One fleet proxy."""

    def __init__(self, name, mode, proxy):
        self.name, self.mode, self.proxy = name, mode, proxy


class Fleet:
    def __init__(self, ctx):
        """Starts the store, the TLS origin and the fleet proxies (on the main thread:
        they die with the test through PR_SET_PDEATHSIG)."""
        self.store = RedisStore(ctx.workdir)
        ctx.stores.append(self.store)          # stopped (by PID) at the context's cleanup
        self.store.start()
        ca_cert, ca_key = ctx.gen_ca()
        ctx._cert = H.make_cert(ctx.workdir, TLS_HOSTS[0], extra_names=tuple(TLS_HOSTS[1:]))
        self.tls_origin = ctx.origin(tls=True)
        self.tls_ctx = ssl.create_default_context(cafile=ca_cert)
        self.edges = [Edge(name, mode, ctx.proxy(
            fleet_config(self.store.url, mode, self.tls_origin.port, ca_cert, ca_key,
                         ctx._cert[0]), name=name)) for name, mode in FLEET_MODES]
        self.lock = threading.Lock()
        self.kill_at = self.restart_at = None
        self.killed_at = self.restarted_at = None

    @property
    def proxies(self):
        return [e.proxy for e in self.edges]

    # -- the outage (main thread) ------------------------------------------------------
    def schedule(self, t_load, load_end):
        self.kill_at = t_load + OUTAGE_AT * (load_end - t_load)
        self.restart_at = self.kill_at + OUTAGE_FOR

    def tick(self, now, t_load):
        if self.killed_at is None and self.kill_at is not None and now >= self.kill_at:
            self.store.kill()
            with self.lock:
                self.killed_at = time.monotonic()
            H.log("fleet: redis-server killed at t=%.0fs (SIGKILL); back in %.0f s"
                  % (self.killed_at - t_load, OUTAGE_FOR))
        elif self.killed_at is not None and self.restarted_at is None and \
                now >= self.restart_at:
            self.restart(t_load)

    def restart(self, t_load):
        """Starts the store again if it is down (also at the end of a short run)."""
        if self.killed_at is None or self.restarted_at is not None:
            return
        self.store.start()
        with self.lock:
            self.restarted_at = time.monotonic()
        H.log("fleet: redis-server started again at t=%.0fs (same port, empty), down %.1f s"
              % (self.restarted_at - t_load, self.restarted_at - self.killed_at))

    def in_outage(self, t0, t1):
        """Did [t0, t1] overlap the outage (with OUTAGE_SLACK after the restart)?"""
        with self.lock:
            k, r = self.killed_at, self.restarted_at
        return k is not None and t1 >= k and (r is None or t0 <= r + OUTAGE_SLACK)

    def judge_proxy_answer(self, edge, resp, t0, t1):
        """(fail, warn, detail) for an answer a fleet proxy made itself."""
        if resp.status == 503 and resp.proxy_error == "proxy_internal_error":
            if edge.mode != "fail_closed":
                return ("the fleet store's 503 from a %s proxy" % edge.mode, None,
                        resp.hd.get("proxy-status", ""))
            if "retry-after" not in resp.hd:
                return None, "fail_closed 503 without Retry-After", edge.name
            if not self.in_outage(t0, t1):
                return None, "fail_closed 503 outside the store outage", \
                    resp.hd.get("proxy-status", "")
            return None, None, ""
        if resp.status == 503 and resp.proxy_error == "connection_limit_reached":
            return None, None, ""        # parked past max_wait (the shares are smaller)
        return None, "unexpected proxy answer through the fleet", "%s %s" % (
            edge.name, resp.hd.get("proxy-status", ""))

    def outage_note(self, edge, label, t0, t1):
        """The tally figure for an answer that overlapped the outage (or None)."""
        if self.in_outage(t0, t1):
            return "%s (%s) answers during the store outage: %s" % (edge.name, edge.mode, label)
        return None

    def store_metrics(self, proxy):
        """(fleet_store_up, fleet_degraded_seconds_total) of a fleet proxy, or Nones."""
        try:
            m = proxy.metrics()
        except Exception:  # noqa: BLE001
            return None, None
        return (H.mget(m, "politeproxy_fleet_store_up"),
                H.mget(m, "politeproxy_fleet_degraded_seconds_total"))

    def checks(self, checks, info, t_load):
        """After the load: the outage happened, each proxy noticed it and rejoined."""
        ok = self.killed_at is not None and self.restarted_at is not None
        checks.append(("fleet: redis-server killed and started again", ok,
                       "down t=%.0f-%.0fs" % (self.killed_at - t_load,
                                              self.restarted_at - t_load) if ok
                       else "killed %s, restarted %s" % (self.killed_at, self.restarted_at)))
        info["fleet"] = []
        for e in self.edges:
            up, degraded = self.store_metrics(e.proxy)
            info["fleet"].append((e.name, e.mode, up, degraded))
            good = up == 1 and (degraded or 0) > 0
            checks.append(("fleet: %s noticed the outage and rejoined" % e.name, good,
                           "fleet_store_up %s at the end, degraded seconds %s"
                           % (up, None if degraded is None else "%.1f" % degraded)))
