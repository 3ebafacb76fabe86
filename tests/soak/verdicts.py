"""The verdicts after the load: the settle wait (every host idle, descriptors back at
the baseline), then the checks, each one (name, ok, text) appended to the run's list:
no slot or parked request held, descriptors back, RSS flat after warm-up (rss_verdict),
one response per request, the reload counters right."""

import time

from proxy_admin import reload_counts, settle_state
from sampling import describe_new_fds
from soak_config import FD_SLACK, RSS_BOUND_FRACTION, RSS_BOUND_KIB, SETTLE_MAX


def settle(proxy, alive, fd_base, fails):
    """Waits (at most SETTLE_MAX s) until every host is idle and the descriptor count is
    back at fd_base. Returns (the last settle_state or None, seconds waited)."""
    settle_t0 = time.monotonic()
    last = None
    if alive:
        while True:
            try:
                last = settle_state(proxy)
            except Exception as e:  # noqa: BLE001
                fails.append(("admin answers after the load", "%s: %s"
                              % (type(e).__name__, e)))
                last = None
                break
            if last["quiet"] and last["fds"] <= fd_base:
                break
            if time.monotonic() - settle_t0 >= SETTLE_MAX:
                break
            time.sleep(0.5)
    return last, time.monotonic() - settle_t0


def leak_checks(last, pid, fd_base, fd_base_table, samples, checks, info):
    """No host busy, no host gauge above 0, descriptors back to the baseline."""
    if last is not None:
        busy = last["busy_hosts"]
        checks.append(("/hosts: in_flight == 0 and waiting == 0", not busy,
                       "%d hosts tracked, all idle" % last["n_hosts"] if not busy
                       else "not idle after %.0f s: %s" % (info["settle"], busy[:8])))
        checks.append(("host_in_flight / host_waiting gauges == 0", not last["busy_gauges"],
                       "all 0" if not last["busy_gauges"]
                       else "non-zero: %s" % last["busy_gauges"][:8]))
        fd_ok = last["fds"] <= fd_base + FD_SLACK
        extra = ""
        if not fd_ok:
            extra = "; new descriptors: " + describe_new_fds(pid, fd_base_table)
        checks.append(("fds back to baseline (+%d)" % FD_SLACK, fd_ok,
                       "baseline %d, end %d%s" % (fd_base, last["fds"], extra)))
        info["fd_end"] = last["fds"]
        info["fd_new"] = describe_new_fds(pid, fd_base_table)
    info["fd_base"] = fd_base
    info["fd_max"] = max([s.fds for s in samples if s.fds is not None] or [0])


def rss_check(samples, checks, info):
    rss = rss_verdict(samples, info["load_len"])
    info["rss"] = rss
    if rss["ok"] is None:
        checks.append(("RSS flat after warm-up", True, "too few samples to judge: "
                       + rss["text"]))
    else:
        checks.append(("RSS flat after warm-up", rss["ok"], rss["text"]))


def request_checks(tally, checks):
    """Exactly one response per request, or the client's own abort."""
    req_fails = sum(tally.fails.values())
    checks.append(("every request: one response or its own abort", req_fails == 0,
                   "%d requests, %d failures" % (tally.requests, req_fails)))
    checks.append(("requests were made", tally.requests > 0, "%d" % tally.requests))


def reload_check(proxy, reloader, checks, info):
    ok_n, fail_n = reload_counts(proxy.metrics())
    rl_ok = ok_n == reloader.valid and fail_n == reloader.invalid and reloader.n > 0
    checks.append(("config_reloads_total{result} matches the SIGHUPs sent", rl_ok,
                   "sent %d valid / %d invalid; counter success=%d failure=%d"
                   % (reloader.valid, reloader.invalid, ok_n, fail_n)))
    info["reloads"] = (reloader.valid, reloader.invalid, ok_n, fail_n)


def rss_window(samples, lo, hi):
    v = [s.rss for s in samples if lo <= s.t < hi and s.rss is not None]
    return (sum(v) / len(v), len(v)) if v else (None, 0)


def rss_verdict(samples, load_len):
    """RSS growth from the warm-up window to the last window; ok None: too few samples.
    Also the means, the max and the last sample's RSS for the summary."""
    if load_len >= 240:
        warm = (120.0, 180.0)
        tail = (load_len - 60.0, load_len + 1.0)
    else:
        warm = (load_len / 4, load_len / 2)
        tail = (load_len * 3 / 4, load_len + 1.0)
    wm, wn = rss_window(samples, *warm)
    tm, tn = rss_window(samples, *tail)
    r = {"warm_mean": wm, "tail_mean": tm,
         "max": max([s.rss for s in samples if s.rss] or [0]),
         "last": samples[-1].rss if samples else None, "ok": None}
    if wm is None or tm is None or wn < 2 or tn < 2:
        r["text"] = "warm-up window %d samples, last window %d" % (wn, tn)
        return r
    bound = max(RSS_BOUND_FRACTION * wm, RSS_BOUND_KIB)
    growth = tm - wm
    r["ok"] = growth <= bound
    r["text"] = ("mean %.1f MiB over t=%.0f-%.0fs, %.1f MiB over t=%.0f-%.0fs: %+.2f MiB"
                 " (bound +%.1f MiB = max(10%%, 5 MiB))"
                 % (wm / 1024, warm[0], warm[1], tm / 1024, tail[0], min(tail[1], load_len),
                    growth / 1024, bound / 1024))
    return r
