"""The summary printed at the end of a run (report) and the digest of the proxy's own
log it includes (log_summary)."""

import collections
import re
import sys

from sampling import fmt_count, fmt_mib
from soak_config import FD_SLACK, SAMPLE_EVERY


def report(args, info, tally, watched, checks, desync):
    w = sys.stdout.write
    main = watched[0]
    samples, end_sample = main.samples, main.end_sample
    load = info.get("load_len", 0.0)
    w("\n==================== politeproxy soak summary ====================\n")
    w("binary          %s\n" % args.proxy)
    w("duration        load %.1f s (%.1f min), settle %.1f s; %d client threads, seed %d\n"
      % (load, load / 60, info.get("settle", 0.0), args.clients, args.seed))
    w("requests        %d (%.0f/s)\n" % (tally.requests, tally.requests / max(1.0, load)))
    w("\nby outcome (status, or status:proxy-error for answers the proxy made itself):\n")
    for lab, n in sorted(tally.by_label.items(), key=lambda kv: (-kv[1], kv[0])):
        w("  %-44s %8d\n" % (lab, n))
    w("\nby scenario (requests; outcomes):\n")
    for scn, n in sorted(tally.by_scenario.items(), key=lambda kv: (-kv[1], kv[0])):
        labs = sorted(((lab, k) for (s, lab), k in tally.by_scn_label.items() if s == scn),
                      key=lambda kv: -kv[1])
        w("  %-28s %7d   %s\n" % (scn, n, ", ".join("%s %d" % lk for lk in labs[:5])
                                   + (" ..." if len(labs) > 5 else "")))
    w("\nscenario runs (one connection each) and mean seconds per run:\n  ")
    w(", ".join("%s %d x %.2fs" % (k, tally.scn_runs[k], tally.scn_time[k] / tally.scn_runs[k])
                for k in sorted(tally.scn_runs)) + "\n")
    w("\nper proxy (RSS MiB: first before the load, warm-up mean, last-window mean, last, max;"
      " fds: baseline, end (allowed <= baseline + %d), max during the load):\n" % FD_SLACK)
    for wt in watched:
        rss, pi = wt.info.get("rss", {}), wt.info
        last = wt.end_sample.rss if wt.end_sample else rss.get("last")
        w("  %-8s RSS %s, %s, %s, %s, %s; fds %s, %s, %s; CPU %s s; exit %s\n" % (
            wt.name, fmt_mib(wt.rss_first), fmt_mib(rss.get("warm_mean")),
            fmt_mib(rss.get("tail_mean")), fmt_mib(last), fmt_mib(rss.get("max")),
            wt.fd_base, pi.get("fd_end"), pi.get("fd_max"),
            "-" if pi.get("cpu") is None else "%.1f" % pi["cpu"], pi.get("exit")))
        if pi.get("fd_new") not in (None, "none"):
            w("           changed descriptors at the end: %s\n" % pi["fd_new"])
    w("\n")
    if "reloads" in info:
        v, i, ok_n, fail_n = info["reloads"]
        w("reloads         %d valid sent -> success %d; %d invalid sent -> failure %d\n"
          % (v, ok_n, i, fail_n))
    w("origin peak     max in flight per host seen by the origin: %s\n" % info.get("origin_peak"))
    if main.info.get("cpu") is not None:
        w("proxy CPU       soak proxy: %.2f ms per request (of all the run's requests)\n"
          % (1000 * main.info["cpu"] / max(1, tally.requests)))
    if info.get("outcomes"):
        w("proxy counted   requests_total by outcome: %s\n" % ", ".join(
            "%s %d" % (k, v) for k, v in sorted(info["outcomes"].items())))
    if info.get("limit_changes"):
        lc = info["limit_changes"]
        w("limit changes   healthy hosts: up %d, down %d, collapse %d; throttled/faulty and"
          " ephemeral: up %d, down %d, collapse %d\n" % tuple(
              lc[(g, d)] for g in ("healthy", "others") for d in ("up", "down", "collapse")))
    if info.get("hosts_end"):
        w("\nhosts at the end (limit/configured, rate/configured, p95 ms):\n")
        row = []
        for h in sorted(info["hosts_end"], key=lambda h: h["key"]):
            p95 = h.get("p95_seconds")
            row.append("%s %s/%s %g/%g %s" % (
                h["key"].split(".")[0], h.get("limit"), h.get("configured_limit"),
                h.get("rate") or 0, h.get("configured_rate") or 0,
                "-" if p95 is None else "%.0f" % (p95 * 1000)))
        for i in range(0, len(row), 4):
            w("  " + "   ".join("%-24s" % r for r in row[i:i + 4]).rstrip() + "\n")
    for wt in watched:
        lg = wt.info.get("log")
        if lg:
            w("\n%s log: %d lines; %s\n" % (wt.name, lg["lines"], ", ".join(
                "%s %d" % kv for kv in sorted(lg["levels"].items())) or "no levels"))
            for line in lg["notable"]:
                w("  | %s\n" % line[:200])
    tagged_summary(w, info, tally, desync)
    w("\nsamples (every %.0f s; t from load start):\n" % SAMPLE_EVERY)
    w("  %7s %9s %5s %9s %7s %7s\n" % ("t", "rss MiB", "fds", "requests", "conns", "hosts"))
    step = max(1, len(samples) // 24)
    shown = samples[::step] + ([end_sample] if end_sample else [])
    for s in shown:
        w("  %7.0f %9s %5s %9d %7s %7s\n" % (s.t, fmt_mib(s.rss), fmt_count(s.fds), s.requests,
                                             fmt_count(s.client_conns), fmt_count(s.hosts)))
    if tally.warns:
        w("\nwarnings (do not fail the run; look at them):\n")
        for kind, n in tally.warns.most_common():
            w("  %6d  %s\n" % (n, kind))
            for ex in tally.warn_examples[kind][:4]:
                w("          e.g. %s\n" % ex[:300])
    if tally.fails:
        w("\nrequest failures:\n")
        for kind, n in tally.fails.most_common():
            w("  %6d  %s\n" % (n, kind))
            for ex in tally.fail_examples[kind][:6]:
                w("          e.g. %s\n" % ex[:400])
    w("\nchecks:\n")
    for name, ok, text in checks:
        w("  %-4s %-52s %s\n" % ("ok" if ok else "FAIL", name, text))
    w("==================================================================\n")
    sys.stdout.flush()


def tagged_summary(w, info, tally, desync):
    """Requests with ids, what the desync origin did, the fleet's outage."""
    kinds, late, nv, _ = desync.summary()
    w("\nrequests with ids: %s\n" % ", ".join(
        "%s %d" % kv for kv in sorted(tally.counts.items()) if "outage" not in kv[0]))
    w("desync origin answered: %s; late stray bytes %s; violations %d\n" % (
        ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
        ", ".join("%s %d" % kv for kv in sorted(late.items())) or "none", nv))
    if info.get("fleet"):
        w("fleet store:    %s\n" % info.get("outage", ""))
        for name, mode, up, degraded in info["fleet"]:
            w("  %-8s %-11s fleet_store_up %s at the end, degraded %s s\n" % (
                name, mode, up, "-" if degraded is None else "%.1f" % degraded))
        for k, n in sorted(tally.counts.items()):
            if "outage" in k:
                w("  %-64s %6d\n" % (k, n))


def log_summary(proxy):
    """Counts of the proxy's log lines by level, and the distinct WARN/ERROR lines other
    than the expected 'reload rejected' ones (first 8)."""
    with proxy._lock:
        lines = list(proxy.lines)
    levels = collections.Counter()
    notable, seen = [], set()
    for line in lines:
        lvl = line.split(" ", 1)[0]
        if lvl in ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL"):
            levels[lvl] += 1
        if lvl in ("WARN", "WARNING", "ERROR", "FATAL") and "reload rejected" not in line:
            key = re.sub(r"\d+", "N", line)[:80]
            if key not in seen and len(notable) < 8:
                seen.add(key)
                notable.append(line)
        elif lvl not in levels and not line.startswith(("politeproxy:", "INFO", "DEBUG")):
            key = line[:60]
            if key not in seen and len(notable) < 8:
                seen.add(key)
                notable.append(line)
    return {"lines": len(lines), "levels": levels, "notable": notable}
