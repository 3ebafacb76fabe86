"""The verdicts after the load: the settle wait (every host idle, descriptors back at
the baseline, for every proxy of the run), then the checks, each one (name, ok, text)
appended to the run's list: per proxy no slot or parked request held, descriptors back,
RSS flat after warm-up (rss_verdict); one response per request, each the request's own
(no stray marker anywhere, no desync origin violation); the reload counters right."""

import time

from proxy_admin import reload_counts, settle_state
from sampling import describe_new_fds
from soak_config import FD_SLACK, RSS_BOUND_FRACTION, RSS_BOUND_KIB, SETTLE_MAX


def settle(watched, fails):
    """Waits (at most SETTLE_MAX s in all) until every proxy still alive has every host
    idle and its descriptor count back at its baseline; each Watched keeps its last
    settle_state (None when the admin listener failed). Returns the seconds waited."""
    settle_t0 = time.monotonic()
    pending = [w for w in watched if w.proxy.alive()]
    while pending:
        for w in list(pending):
            try:
                w.last = settle_state(w.proxy)
            except Exception as e:  # noqa: BLE001
                fails.append(("[%s] admin answers after the load" % w.name, "%s: %s"
                              % (type(e).__name__, e)))
                w.last = None
                pending.remove(w)
                continue
            if w.last["quiet"] and w.last["fds"] <= w.fd_base:
                pending.remove(w)
        if not pending or time.monotonic() - settle_t0 >= SETTLE_MAX:
            break
        time.sleep(0.5)
    return time.monotonic() - settle_t0


def leak_checks(w, checks, settle_s):
    """No host busy, no host gauge above 0, descriptors back to the baseline."""
    last, pid, tag = w.last, w.proxy.pid, "[%s] " % w.name
    if last is not None:
        busy = last["busy_hosts"]
        checks.append((tag + "/hosts: in_flight == 0 and waiting == 0", not busy,
                       "%d hosts tracked, all idle" % last["n_hosts"] if not busy
                       else "not idle after %.0f s: %s" % (settle_s, busy[:8])))
        checks.append((tag + "host_in_flight / host_waiting gauges == 0",
                       not last["busy_gauges"], "all 0" if not last["busy_gauges"]
                       else "non-zero: %s" % last["busy_gauges"][:8]))
        fd_ok = last["fds"] <= w.fd_base + FD_SLACK
        extra = ""
        if not fd_ok:
            extra = "; new descriptors: " + describe_new_fds(pid, w.fd_base_table)
        checks.append((tag + "fds back to baseline (+%d)" % FD_SLACK, fd_ok,
                       "baseline %d, end %d%s" % (w.fd_base, last["fds"], extra)))
        w.info["fd_end"] = last["fds"]
        w.info["fd_new"] = describe_new_fds(pid, w.fd_base_table)
    w.info["fd_max"] = max([s.fds for s in w.samples if s.fds is not None] or [0])


def rss_check(w, checks, load_len):
    rss = rss_verdict(w.samples, load_len)
    w.info["rss"] = rss
    name = "[%s] RSS flat after warm-up" % w.name
    if rss["ok"] is None:
        checks.append((name, True, "too few samples to judge: " + rss["text"]))
    else:
        checks.append((name, rss["ok"], rss["text"]))


def request_checks(tally, checks, marker_hits, desync):
    """Exactly one response per request, or the client's own abort; no stray origin
    byte seen by any client; no request on a desync origin connection whose bytes
    answered no request."""
    req_fails = sum(tally.fails.values())
    checks.append(("every request: one response or its own abort", req_fails == 0,
                   "%d requests, %d failures" % (tally.requests, req_fails)))
    checks.append(("requests were made", tally.requests > 0, "%d" % tally.requests))
    n, hits = marker_hits
    checks.append(("no stray origin bytes (EVIL/STRAY markers) seen by any client", n == 0,
                   "none" if n == 0 else "%d time(s), e.g. %s" % (
                       n, "; ".join("%s: %r" % h for h in hits[:3]))))
    _, _, nv, viol = desync.summary()
    checks.append(("desync origin: no request on a connection after stray bytes/101/1xx",
                   nv == 0, "none" if nv == 0 else "%d, e.g. %s" % (nv, "; ".join(viol[:3]))))


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
