#!/usr/bin/python3
"""Soak test for politeproxy (not part of ctest).

    /usr/bin/python3 tests/soak/run_soak.py --proxy build/politeproxy [--minutes 10]

Runs the real proxy for --minutes (default 10, at most 10) against loopback origins
while a bounded pool of client threads sends a mix of well-behaved and misbehaving
traffic (HTTP/1.1, h2c, CONNECT tunnels, an origin that desyncs on purpose), reloads the
configuration every ~20 s (now and then with an invalid file), and samples the proxy's
RSS and open descriptors every ~5 s. Two more proxies form a fleet over a redis-server
of the run's own, intercept TLS, and see the store killed and restarted mid-run. At the
end it stops the clients, lets the proxies settle (up to 15 s) and checks that nothing
leaked in any of them: no slot or parked request left in any host, descriptors back to
the baseline, RSS flat after warm-up; and that every request was answered exactly once,
by its own answer (ids). Exit 0 on pass, 1 on fail (3 when the hard time limit,
--minutes + 75 s, is hit; 4 on SIGINT/SIGTERM). See tests/soak/README.md, which also
lists the modules this entry point puts together.

It reuses tests/integration/harness.py (Proxy, TestContext, base_config, metrics
parsing, RawServer), origin.py (Origin) and redis_store.py (RedisStore).
"""

import argparse
import collections
import os
import signal
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "integration"))
import harness as H  # noqa: E402
from desync_origin import DesyncOrigin  # noqa: E402
from fault_origins import EchoServer, FaultOrigin  # noqa: E402
from fleet import Fleet  # noqa: E402
from load import Soak, join_clients, start_clients  # noqa: E402
from proxy_admin import end_state  # noqa: E402
from reloads import Reloader  # noqa: E402
from report import log_summary, report  # noqa: E402
from sampling import fmt_mib, other_proxies_line, sample_line, write_csv  # noqa: E402
from soak_client import marker_hits  # noqa: E402
from soak_config import (CLIENT_MAX, MAX_MINUTES, OUTAGE_FOR, RELOAD_EVERY,  # noqa: E402
                         SAMPLE_EVERY, SETTLE_MAX, TEARDOWN_BUDGET, make_config)
from tally import Tally  # noqa: E402
from verdicts import (leak_checks, reload_check, request_checks, rss_check,  # noqa: E402
                      settle)
from watched import Watched  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description="politeproxy soak test (see tests/soak/README.md)")
    ap.add_argument("--proxy", default=None,
                    help="the politeproxy binary (default: $POLITEPROXY_BIN)")
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="length of the run, 0.5..10 (default 10); teardown adds <= 75 s")
    ap.add_argument("--clients", type=int, default=24,
                    help="client threads, 1..%d (default 24)" % CLIENT_MAX)
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    ap.add_argument("--samples-csv", default=None,
                    help="also write the 5-second samples to this CSV file")
    a = ap.parse_args(argv)
    # harness: --proxy or $POLITEPROXY_BIN, an executable file (else exit 2), absolute
    a.proxy, _ = H.find_binary([] if a.proxy is None else ["--proxy=" + a.proxy])
    if not 0.5 <= a.minutes <= MAX_MINUTES:
        ap.error("--minutes must be between 0.5 and %g" % MAX_MINUTES)
    if not 1 <= a.clients <= CLIENT_MAX:
        ap.error("--clients must be between 1 and %d" % CLIENT_MAX)
    if a.seed is None:
        a.seed = int(time.time()) % 100000
    return a


def _kill_stores(ctx):
    for st in ctx.stores:      # redis-server, by PID (PDEATHSIG would get it too)
        try:
            st.kill()
        except Exception:  # noqa: BLE001
            pass


def start_watchdog(ctx, t_start, hard_end):
    """At hard_end, or on SIGINT/SIGTERM: say so, SIGKILL the proxies and the store,
    exit 3 (4)."""
    def on_timeout():
        print("FAIL soak: hard time limit (%.1f min) reached; killing the proxy"
              % ((hard_end - t_start) / 60), flush=True)
        try:
            ctx.dump_proxy_output()
        except Exception:  # noqa: BLE001
            pass
        H._kill_all_live()
        _kill_stores(ctx)
        os._exit(3)

    def on_signal(signum, _frame):
        print("FAIL soak: interrupted by signal %d" % signum, flush=True)
        H._kill_all_live()
        _kill_stores(ctx)
        os._exit(4)

    watchdog = threading.Timer(hard_end - time.monotonic(), on_timeout)
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return watchdog


def watch_load(watched, origins, fleet, tally, reloader, t_load, load_end, origin_peaks,
               fails):
    """The monitor, on the main thread until load_end: the proxies' life (twice a
    second), a sample of each every SAMPLE_EVERY s, a reload of the soak proxy every
    RELOAD_EVERY s, the fleet store's outage, and once a minute the origins' peaks kept
    and their records dropped."""
    main = watched[0]
    next_sample = t_load + SAMPLE_EVERY
    next_reload = t_load + RELOAD_EVERY
    next_origin_reset = t_load + 60
    for w in watched:
        w.sample(tally, 0.0)
    prev = main.samples[0]
    while time.monotonic() < load_end:
        dead = [w for w in watched if not w.proxy.alive()]
        if dead:
            for w in dead:
                fails.append(("[%s] proxy alive" % w.name, "the proxy died during the load"
                              " (exit code %s)" % w.proxy.proc.returncode))
            break
        now = time.monotonic()
        fleet.tick(now, t_load)
        if now >= next_sample:
            next_sample += SAMPLE_EVERY
            s = main.sample(tally, now - t_load)
            H.log(sample_line(s, prev, reloader.valid, reloader.invalid))
            H.log(other_proxies_line([(w.name, w.sample(tally, now - t_load))
                                      for w in watched[1:]]))
            prev = s
        if now >= next_origin_reset:
            next_origin_reset += 60
            for h, st in origins[0].stats().items():
                origin_peaks[h] = max(origin_peaks[h], st["peak"])
            for o in origins:
                o.reset()   # origin.py keeps per-request records; bound them
        if now >= next_reload and now < load_end - 5:
            next_reload += RELOAD_EVERY
            reloader.reload()
        time.sleep(min(0.25, max(0.0, load_end - time.monotonic())))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t_start = time.monotonic()
    hard_end = t_start + args.minutes * 60 + TEARDOWN_BUDGET
    ctx = H.TestContext(args.proxy)
    stop = threading.Event()
    watchdog = start_watchdog(ctx, t_start, hard_end)

    tally = Tally()
    fails = []      # (check, message)
    checks = []     # (check, ok, text)
    info = {}
    faults = echo = desync = None
    rc = 1
    try:
        origin = ctx.origin()
        faults = FaultOrigin()
        echo = EchoServer()
        desync = DesyncOrigin()
        H.log("fault origin on 127.0.0.1:%d, echo on 127.0.0.1:%d, desync origin on"
              " 127.0.0.1:%d" % (faults.port, echo.port, desync.port))
        # proxies and redis-server from the main thread: PDEATHSIG
        proxy = ctx.proxy(make_config(echo.port), name="soak")
        fleet = Fleet(ctx)
        time.sleep(0.5)
        watched = [Watched(p) for p in [proxy] + fleet.proxies]
        for w in watched:
            H.log("%s baseline: fds %d, RSS %s MiB" % (w.name, w.fd_base, fmt_mib(w.rss_first)))

        t_load = tally.t0 = time.monotonic()
        load_end = t_start + args.minutes * 60
        fleet.schedule(t_load, load_end)
        soak = Soak(proxy, origin, faults, echo, tally, load_end, stop, desync=desync,
                    fleet=fleet)
        workers = start_clients(soak, args.clients, args.seed)
        H.log("load: %d client threads for %.0f s (seed %d); the fleet store goes down at"
              " t=%.0fs for %.0f s" % (args.clients, load_end - t_load, args.seed,
                                        fleet.kill_at - t_load, OUTAGE_FOR))
        reloader = Reloader(proxy, echo.port, fails)
        origin_peaks = collections.Counter()
        watch_load(watched, [origin, fleet.tls_origin], fleet, tally, reloader, t_load,
                   load_end, origin_peaks, fails)

        # -- teardown --------------------------------------------------------------------
        stop.set()
        t_stop = time.monotonic()
        fleet.restart(t_load)     # a run too short for the outage to end by itself
        stuck = join_clients(workers, t_stop)
        if stuck:
            fails.append(("clients stopped", "%d client threads still running %.0f s after"
                          " the stop" % (len(stuck), time.monotonic() - t_stop)))
        H.log("clients stopped after %.1f s; settling (<= %.0f s)"
              % (time.monotonic() - t_stop, SETTLE_MAX))
        for h, st in origin.stats().items():
            origin_peaks[h] = max(origin_peaks[h], st["peak"])

        for w in watched:
            alive = w.proxy.alive()
            checks.append(("[%s] proxy alive all along" % w.name, alive, "running" if alive
                           else "died, exit code %s" % w.proxy.proc.returncode))
        info["settle"] = settle(watched, fails)
        info["load_len"] = t_stop - t_load
        for w in watched:
            w.finish(tally, time.monotonic() - t_load)

        # -- checks ----------------------------------------------------------------------
        for w in watched:
            leak_checks(w, checks, info["settle"])
            rss_check(w, checks, info["load_len"])
        request_checks(tally, checks, marker_hits(), desync)
        if proxy.alive():
            reload_check(proxy, reloader, checks, info)
        fleet.checks(checks, info, t_load)
        if fleet.killed_at is not None and fleet.restarted_at is not None:
            info["outage"] = "killed at t=%.0fs, started again at t=%.0fs" % (
                fleet.killed_at - t_load, fleet.restarted_at - t_load)
        info["origin_peak"] = max(origin_peaks.values() or [0])
        if proxy.alive():
            end_state(proxy, info)

        # stop the proxies: SIGTERM drains and exits 0
        for w in watched:
            code = w.info["exit"] = w.proxy.stop()
            checks.append(("[%s] proxy exits 0 on SIGTERM" % w.name, code == 0,
                           "exit code %s" % code))
            w.info["log"] = log_summary(w.proxy)
        for name, msg in fails:
            checks.append((name, False, msg))
        rc = 0 if all(ok for _, ok, _ in checks) else 1
        report(args, info, tally, watched, checks, desync)
        if args.samples_csv:
            write_csv(args.samples_csv, watched[0].samples)
        if rc != 0:
            for w in watched:
                print("---- %s output tail ----" % w.name)
                print(w.proxy.tail(40))
    except Exception:  # noqa: BLE001
        print("FAIL soak: unexpected error:\n%s" % traceback.format_exc(), flush=True)
        try:
            ctx.dump_proxy_output()
        except Exception:  # noqa: BLE001
            pass
        rc = 1
    finally:
        stop.set()
        try:
            ctx.cleanup()   # stops the proxies (by PID), origin.py's origins, redis-server
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            H._kill_all_live()
        for srv in (faults, echo, desync):
            if srv is not None:
                srv.stop()
        watchdog.cancel()
    print("%s soak (%.1f s)" % ("PASS" if rc == 0 else "FAIL", time.monotonic() - t_start),
          flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
