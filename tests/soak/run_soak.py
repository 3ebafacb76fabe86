#!/usr/bin/python3
"""Soak test for politeproxy (not part of ctest).

    /usr/bin/python3 tests/soak/run_soak.py --proxy build/politeproxy [--minutes 10]

Runs the real proxy for --minutes (default 10, at most 10) against loopback origins
while a bounded pool of client threads sends a mix of well-behaved and misbehaving
traffic, reloads the configuration every ~20 s (now and then with an invalid file), and
samples the proxy's RSS and open descriptors every ~5 s. At the end it stops the
clients, lets the proxy settle (up to 15 s) and checks that nothing leaked: no slot or
parked request left in any host, descriptors back to the baseline, RSS flat after
warm-up, every request answered exactly once. Exit 0 on pass, 1 on fail (3 when the
hard time limit, --minutes + 1 minute, is hit; 4 on SIGINT/SIGTERM). See
tests/soak/README.md, which also lists the modules this entry point puts together.

It reuses tests/integration/harness.py (Proxy, TestContext, base_config, metrics
parsing, RawServer) and origin.py (Origin).
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
from fault_origins import EchoServer, FaultOrigin  # noqa: E402
from load import Soak, join_clients, start_clients  # noqa: E402
from proxy_admin import end_state  # noqa: E402
from reloads import Reloader  # noqa: E402
from report import log_summary, report  # noqa: E402
from sampling import (cpu_seconds, fd_count, fd_table, fmt_mib, rss_kib,  # noqa: E402
                      sample_line, take_sample, write_csv)
from soak_config import (CLIENT_MAX, MAX_MINUTES, RELOAD_EVERY, SAMPLE_EVERY,  # noqa: E402
                         SETTLE_MAX, TEARDOWN_BUDGET, make_config)
from tally import Tally  # noqa: E402
from verdicts import (leak_checks, reload_check, request_checks, rss_check,  # noqa: E402
                      settle)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="politeproxy soak test (see tests/soak/README.md)")
    ap.add_argument("--proxy", default=None,
                    help="the politeproxy binary (default: $POLITEPROXY_BIN)")
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="length of the run, 0.5..10 (default 10); teardown adds <= 1 min")
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


def start_watchdog(ctx, t_start, hard_end):
    """At hard_end, or on SIGINT/SIGTERM: say so, SIGKILL the proxy, exit 3 (4)."""
    def on_timeout():
        print("FAIL soak: hard time limit (%.1f min) reached; killing the proxy"
              % ((hard_end - t_start) / 60), flush=True)
        try:
            ctx.dump_proxy_output()
        except Exception:  # noqa: BLE001
            pass
        H._kill_all_live()
        os._exit(3)

    def on_signal(signum, _frame):
        print("FAIL soak: interrupted by signal %d" % signum, flush=True)
        H._kill_all_live()
        os._exit(4)

    watchdog = threading.Timer(hard_end - time.monotonic(), on_timeout)
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return watchdog


def watch_load(proxy, origin, tally, reloader, t_load, load_end, samples, origin_peaks,
               fails):
    """The monitor, on the main thread until load_end: the proxy's life (twice a second),
    a sample every SAMPLE_EVERY s, a reload every RELOAD_EVERY s, and once a minute the
    origin's peaks kept and its records dropped."""
    next_sample = t_load + SAMPLE_EVERY
    next_reload = t_load + RELOAD_EVERY
    next_origin_reset = t_load + 60
    samples.append(take_sample(proxy, tally, 0.0))
    prev = samples[0]
    while time.monotonic() < load_end:
        if not proxy.alive():
            fails.append(("proxy alive", "the proxy died during the load (exit code %s)"
                          % proxy.proc.returncode))
            break
        now = time.monotonic()
        if now >= next_sample:
            next_sample += SAMPLE_EVERY
            s = take_sample(proxy, tally, now - t_load)
            samples.append(s)
            H.log(sample_line(s, prev, reloader.valid, reloader.invalid))
            prev = s
        if now >= next_origin_reset:
            next_origin_reset += 60
            for h, st in origin.stats().items():
                origin_peaks[h] = max(origin_peaks[h], st["peak"])
            origin.reset()   # origin.py keeps per-request records; bound them
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
    samples = []
    info = {}
    faults = echo = None
    rc = 1
    try:
        origin = ctx.origin()
        faults = FaultOrigin()
        echo = EchoServer()
        H.log("fault origin on 127.0.0.1:%d, echo on 127.0.0.1:%d" % (faults.port, echo.port))
        proxy = ctx.proxy(make_config(echo.port), name="soak")  # main thread: PDEATHSIG
        time.sleep(0.5)
        fd_base = fd_count(proxy.pid)
        fd_base_table = fd_table(proxy.pid)
        rss_first = rss_kib(proxy.pid)
        H.log("baseline: fds %d, RSS %s MiB" % (fd_base, fmt_mib(rss_first)))

        t_load = tally.t0 = time.monotonic()
        load_end = t_start + args.minutes * 60
        soak = Soak(proxy, origin, faults, echo, tally, load_end, stop)
        workers = start_clients(soak, args.clients, args.seed)
        H.log("load: %d client threads for %.0f s (seed %d)" % (args.clients,
                                                                load_end - t_load, args.seed))
        reloader = Reloader(proxy, echo.port, fails)
        origin_peaks = collections.Counter()
        watch_load(proxy, origin, tally, reloader, t_load, load_end, samples, origin_peaks,
                   fails)

        # -- teardown --------------------------------------------------------------------
        stop.set()
        t_stop = time.monotonic()
        stuck = join_clients(workers, t_stop)
        if stuck:
            fails.append(("clients stopped", "%d client threads still running %.0f s after"
                          " the stop" % (len(stuck), time.monotonic() - t_stop)))
        H.log("clients stopped after %.1f s; settling (<= %.0f s)"
              % (time.monotonic() - t_stop, SETTLE_MAX))
        for h, st in origin.stats().items():
            origin_peaks[h] = max(origin_peaks[h], st["peak"])

        alive = proxy.alive()
        checks.append(("proxy alive all along", alive,
                       "running" if alive else "died, exit code %s" % proxy.proc.returncode))
        last, info["settle"] = settle(proxy, alive, fd_base, fails)
        end_sample = take_sample(proxy, tally, time.monotonic() - t_load) if alive else None
        info["load_len"] = t_stop - t_load

        # -- checks ----------------------------------------------------------------------
        leak_checks(last, proxy.pid, fd_base, fd_base_table, samples, checks, info)
        rss_check(samples, checks, info)
        request_checks(tally, checks)
        if alive:
            reload_check(proxy, reloader, checks, info)
        info["origin_peak"] = max(origin_peaks.values() or [0])
        if alive:
            end_state(proxy, info)
            info["cpu"] = cpu_seconds(proxy.pid)

        # stop the proxy: SIGTERM drains and exits 0
        code = proxy.stop()
        checks.append(("proxy exits 0 on SIGTERM", code == 0, "exit code %s" % code))
        info["log"] = log_summary(proxy)
        for name, msg in fails:
            checks.append((name, False, msg))
        rc = 0 if all(ok for _, ok, _ in checks) else 1
        report(args, info, tally, samples, end_sample, checks, rss_first)
        if args.samples_csv:
            write_csv(args.samples_csv, samples)
        if rc != 0:
            print("---- proxy output tail ----")
            print(proxy.tail(40))
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
            ctx.cleanup()   # stops the proxy (by PID) and origin.py's origin
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            H._kill_all_live()
        for srv in (faults, echo):
            if srv is not None:
                srv.stop()
        watchdog.cancel()
    print("%s soak (%.1f s)" % ("PASS" if rc == 0 else "FAIL", time.monotonic() - t_start),
          flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
