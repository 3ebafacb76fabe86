"""The adaptive benchmark's figures and report (adaptive_bench.py runs, this reads): pure
functions of the raw figures a run keeps, no processes, no clock, so a report can be
rendered again from a run's JSON (adaptive_bench.py --report-from FILE.json).

Metrics, from the ORIGIN's event log (arrival, service start, finish, status per request;
the origin's view is the truth), per phase of C:
  goodput share      200s finished in the phase / (seconds x min(C/mean, ceiling)), the
                     ceiling being what the contender is configured to allow:
                     min(level/mean, rate) req/s (level 8 for all but politeproxy-defaults,
                     whose ceiling is min(2/mean, 1 req/s))
  mean origin queue  time-average of waiting (queued, not in service), exact
  503s               refused at the wall, by arrival time
  p95 at origin      arrival -> finish of the phase's 200s; "/ service p95" divides it by the
                     p95 of the service times (finish - start) that started in the phase
  to within 1 of C   from the phase's start (a capacity change, or the crawl's start for the
                     first phase): the first t from which in flight (in service + waiting)
                     stays within [C-1, C+1] for 1 s within the phase; "never" if it does not.
                     Excursions out of the band no longer than --settle-blip-ms (20) do not
                     count: every hand-off from a response to the next request leaves a
                     gap (~0.5 ms through the proxy, 5-40 ms in Scrapy), and with constant
                     service the requests finish in step, so read strictly (0) nobody
                     ever "stays" within 1 of C
  within 1 of C      time-weighted share of the phase with in flight within [C-1, C+1]
With --repeats > 1 each figure is the median over repeats ("never" counts as infinite).

The report: the phase table per shape and schedule (medians over repeats), the goals for
politeproxy-8, every run's totals, politeproxy's limit trace (/hosts) around each capacity
change, the notes and the failures.
"""

import bisect
import collections
import json
import math
import statistics

SETTLE_HOLD = 1.0           # in flight must stay within 1 of C this long to count as reached
QUEUE_LEVEL = 0.005        # mean origin queues this close are level (below the report's precision)
TRACE_OFFSETS = [-1, 0.5, 1, 2, 3, 5, 10]
# /hosts fields shown in their own columns or not worth showing; any other field the proxy
# adds (baseline, recent latency, reason of the last change...) goes to the "other" column
HOSTS_SHOWN = {"key", "limit", "configured_limit", "stream_ceiling", "upstream_protocol", "in_flight", "waiting",
               "rate", "configured_rate", "paused_until", "paused_seconds", "override_reason", "p95_seconds",
               "enforce"}


# --------------------------------------------------------------------------------------
# metrics from the origin's events (pure functions)
# --------------------------------------------------------------------------------------
def step_series(intervals):
    """[start, end) intervals (end None: still open) -> sorted [(t, count from t on)]."""
    deltas = []
    for a, b in intervals:
        if b is not None and b <= a:
            continue
        deltas.append((a, 1))
        if b is not None:
            deltas.append((b, -1))
    deltas.sort()
    out, v = [], 0
    for t, d in deltas:
        v += d
        if out and out[-1][0] == t:
            out[-1] = (t, v)
        else:
            out.append((t, v))
    return out


def pieces(series, p0, p1):
    """(start, end, value) pieces of a step series covering [p0, p1)."""
    i = bisect.bisect_right(series, (p0, math.inf)) - 1
    t, v = p0, series[i][1] if i >= 0 else 0
    for tt, vv in series[i + 1:]:
        if tt >= p1:
            break
        yield t, tt, v
        t, v = tt, vv
    yield t, p1, v


def value_at(series, t):
    i = bisect.bisect_right(series, (t, math.inf)) - 1
    return series[i][1] if i >= 0 else 0


def time_average(series, p0, p1):
    return sum((e - s) * v for s, e, v in pieces(series, p0, p1)) / (p1 - p0)


def share_within(series, lo, hi, p0, p1):
    return sum(e - s for s, e, v in pieces(series, p0, p1) if lo <= v <= hi) / (p1 - p0)


def time_to_settle(series, lo, hi, p0, p1, hold=SETTLE_HOLD, blip=0.0):
    """Seconds from p0 to the first t from which the value stays in [lo, hi] for `hold`
    seconds (within [p0, p1)); None if never. Excursions out of the band that last no
    longer than `blip` seconds do not break a run (0: every excursion does)."""
    run = out_since = None
    for s, e, v in pieces(series, p0, p1):
        if not lo <= v <= hi:
            out_since = s if out_since is None else out_since
            if e - out_since > blip:
                run = None
            continue
        out_since = None
        if run is None:
            run = s
        if e - run >= hold:
            return run - p0
    return None


def p95(xs):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[max(0, math.ceil(0.95 * len(xs)) - 1)]  # nearest rank


def phase_bounds(schedule):
    """[[C, secs], ...] -> [(C, start, end)] on the origin's clock."""
    out, t = [], 0.0
    for cap, secs in schedule:
        out.append((cap, t, t + secs))
        t += secs
    return out


def analyze(stats, contender, blip=0.0):
    """Per-phase figures and run totals from /__stats of one run."""
    mean, events = stats["mean"], stats["events"]
    served = [e for e in events if e[3] != 503]
    in_flight = step_series((e[0], e[2]) for e in served)
    waiting = step_series((e[0], e[1] if e[1] is not None else e[2]) for e in served)
    ceiling = min(contender.level / mean, contender.rate)
    phases = []
    for cap, p0, p1 in phase_bounds(stats["schedule"]):
        ok = [e for e in events if e[3] == 200 and p0 <= e[2] < p1]
        service = [e[2] - e[1] for e in served if e[1] is not None and e[2] is not None and p0 <= e[1] < p1]
        at_origin, service_p95 = p95([e[2] - e[0] for e in ok]), p95(service)
        phases.append({
            "C": cap, "start": p0, "end": p1, "ok": len(ok),
            "goodput": len(ok) / ((p1 - p0) * min(cap / mean, ceiling)),
            "queue": time_average(waiting, p0, p1),
            "busy": sum(1 for e in events if e[3] == 503 and p0 <= e[0] < p1),
            "p95": at_origin, "service_p95": service_p95,
            "p95_ratio": at_origin / service_p95 if at_origin and service_p95 else None,
            "settle": time_to_settle(in_flight, cap - 1, cap + 1, p0, p1, blip=blip),
            "within": share_within(in_flight, cap - 1, cap + 1, p0, p1),
            "mean_in_flight": time_average(in_flight, p0, p1),
            "peak_in_flight": max(v for _, _, v in pieces(in_flight, p0, p1)),
        })
    end = phases[-1]["end"]
    counted = [e for e in events if e[0] < end]
    return {
        "phases": phases,
        "ok": sum(p["ok"] for p in phases),
        "busy": sum(1 for e in counted if e[3] == 503),
        "gone": sum(1 for e in counted if e[3] == 499),
        "arrivals_per_s": len(counted) / end,
        "in_flight": in_flight,
    }


# --------------------------------------------------------------------------------------
# report (markdown)
# --------------------------------------------------------------------------------------
PHASE_FIGURES = ("ok", "goodput", "queue", "busy", "p95", "service_p95", "p95_ratio", "within", "mean_in_flight",
                 "peak_in_flight")


def median_phases(results):
    """Each per-phase figure's median over repeats; time to settle: never = infinite."""
    phases = []
    for i, first in enumerate(results[0]["phases"]):
        ps = [r["phases"][i] for r in results]
        out = {"C": first["C"], "start": first["start"], "end": first["end"]}
        for key in PHASE_FIGURES:
            values = [p[key] for p in ps if p[key] is not None]
            out[key] = statistics.median(values) if values else None
        settle = statistics.median([math.inf if p["settle"] is None else p["settle"] for p in ps])
        out["settle"] = None if settle == math.inf else settle
        phases.append(out)
    return phases


def cells(runs):
    """{(shape, schedule, contender): [completed runs]} in run order."""
    out = collections.OrderedDict()
    for run in runs:
        key = (run["shape"], tuple(run["schedule"]), run["contender"])
        out.setdefault(key, [])
        if "result" in run:
            out[key].append(run)
    return out


def pct(x):
    return "–" if x is None else "%.0f%%" % (100 * x)


def num(x, digits=2):
    return "–" if x is None else ("%." + str(digits) + "f") % x


def ms(x):
    return "–" if x is None else "%.0f" % (1000 * x)


def seconds(x):
    return "never" if x is None else "%.1f s" % x


def phase_label(i, phase):
    return "%d (C=%d)" % (i + 1, phase["C"])


def phase_table(L, by_cell, shape, schedule, contenders):
    L.append("| contender | phase | goodput share | 200s | mean origin queue | 503s | p95 at origin ms "
             "| p95 / service p95 | to within 1 of C | within 1 of C | in flight mean / peak |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in contenders:
        runs = by_cell.get((shape, schedule, name))
        if not runs:
            L.append("| %s | (no completed run) |||||||||" % name)
            continue
        for i, p in enumerate(median_phases([r["result"] for r in runs])):
            L.append("| %s | %s | %s | %.0f | %s | %.0f | %s | %s | %s%s | %s | %s / %.0f |" % (
                name if i == 0 else "", phase_label(i, p), pct(p["goodput"]), p["ok"], num(p["queue"]),
                p["busy"], ms(p["p95"]), num(p["p95_ratio"]), seconds(p["settle"]), " (from start)" if i == 0 else "",
                pct(p["within"]), num(p["mean_in_flight"], 1), p["peak_in_flight"]))
    L.append("")


def totals_table(L, runs):
    L.append("| run | 200s | 503s (origin) | 499s | arrivals/s | Scrapy responses: by status, via proxy | Scrapy errors "
             "| Scrapy closed itself | proxy limit min-max | /hosts samples |")
    L.append("|---|---:|---:|---:|---:|---|---|---|---|---:|")
    for run in runs:
        if "result" not in run:
            L.append("| %s | failed: %s |||||||||" % (run["name"], run.get("error", "?").replace("\n", " ")[:200]))
            continue
        r, sp = run["result"], run.get("spider")
        spider = errors = "–"
        if sp:
            spider = "%s; %d via proxy" % (", ".join("%s: %d" % kv for kv in sorted(sp["statuses"].items())),
                                          sp["via_proxy"])
            errors = ", ".join("%s: %d" % kv for kv in sorted(sp["errors"].items())) or "none"
        limits = [entry["limit"] for _, entry in run.get("hosts", []) if entry]
        L.append("| %s | %d | %d | %d | %.0f | %s | %s | %s | %s | %s |" % (
            run["name"], r["ok"], r["busy"], r["gone"], r["arrivals_per_s"], spider, errors,
            "yes" if run.get("scrapy_closed_itself") else "no (stopped)",
            "%d-%d" % (min(limits), max(limits)) if limits else "–",
            len(run["hosts"]) if "hosts" in run else "–"))
    L.append("")


def evaluate_goals(pp, t4, total_busy):
    """[(goal, measured, met)] for politeproxy-8's median phases (pp) against
    autothrottle-t4's (t4, may be None)."""
    goals = []
    for i, p in enumerate(pp):
        if i == 0 or p["C"] >= pp[i - 1]["C"]:
            continue
        goals.append(("phase %s: within 1 of C for >= 80%% of the phase" % phase_label(i, p), pct(p["within"]),
                      p["within"] >= 0.8))
        goals.append(("phase %s: within 1 of C <= 3 s after the drop" % phase_label(i, p), seconds(p["settle"]),
                      p["settle"] is not None and p["settle"] <= 3.0))
    goals.append(("mean origin queue <= 0.3 in every phase", ", ".join(num(p["queue"]) for p in pp),
                  all(p["queue"] <= 0.3 for p in pp)))
    goals.append(("<= 5 503s in the run", "%.0f" % total_busy, total_busy <= 5))
    goals.append(("p95 at origin <= 2x service time (p95 / service p95) in every phase",
                  ", ".join(num(p["p95_ratio"]) for p in pp),
                  all(p["p95_ratio"] is not None and p["p95_ratio"] <= 2.0 for p in pp)))
    goals.append((">= 85% goodput in every phase", ", ".join(pct(p["goodput"]) for p in pp),
                  all(p["goodput"] >= 0.85 for p in pp)))
    if t4:
        for i, (p, q) in enumerate(zip(pp, t4)):
            goals.append(("phase %s: ahead of autothrottle-t4 on goodput and mean origin queue at once (no lower "
                          "goodput, no longer queue; within %g is level)" % (phase_label(i, p), QUEUE_LEVEL),
                          "goodput %s vs %s, queue %s vs %s" % (
                              pct(p["goodput"]), pct(q["goodput"]), num(p["queue"]), num(q["queue"])),
                          p["goodput"] >= q["goodput"] and p["queue"] <= q["queue"] + QUEUE_LEVEL))
    return goals


def goals_table(L, by_cell, shape, schedule):
    pp_runs = by_cell.get((shape, schedule, "politeproxy-8"))
    if not pp_runs:
        return
    pp = median_phases([r["result"] for r in pp_runs])
    t4_runs = by_cell.get((shape, schedule, "autothrottle-t4"))
    t4 = median_phases([r["result"] for r in t4_runs]) if t4_runs else None
    busy = statistics.median([r["result"]["busy"] for r in pp_runs])
    L.append("Goals for politeproxy-8 (%s service, schedule %s):" % (shape, ":".join(map(str, schedule))))
    L.append("")
    L.append("| goal | measured | met |")
    L.append("|---|---|---|")
    for goal, measured, met in evaluate_goals(pp, t4, busy):
        L.append("| %s | %s | %s |" % (goal, measured, "yes" if met else "**no**"))
    L.append("")


def sample_at(samples, t):
    """The last /hosts sample taken at or before t (None if none, or older than 0.5 s)."""
    i = bisect.bisect_right([s[0] for s in samples], t) - 1
    return samples[i][1] if i >= 0 and t - samples[i][0] <= 0.5 else None


def other_fields(entry):
    def show(v):
        return "%.3g" % v if isinstance(v, float) else json.dumps(v)
    return ", ".join("%s=%s" % (k, show(v)) for k, v in entry.items() if k not in HOSTS_SHOWN)


def limit_trace(L, run):
    samples = run.get("hosts") or []
    in_flight = run["result"]["in_flight"]
    changes = [p["start"] for p in run["result"]["phases"][1:]]
    end = run["result"]["phases"][-1]["end"]
    L.append("%s (%d samples):" % (run["name"], len(samples)))
    L.append("")
    L.append("| change | t | limit | in_flight | waiting | rate | paused s | p95 ms | origin in flight | other fields |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for tc, phase, prev in zip(changes, run["result"]["phases"][1:], run["result"]["phases"]):
        for off in [o for o in TRACE_OFFSETS if tc + o < end]:
            e = sample_at(samples, tc + off)
            label = "C %d->%d at %.0f s" % (prev["C"], phase["C"], tc) if off == TRACE_OFFSETS[0] else ""
            if e is None:
                L.append("| %s | %+g s | – | – | – | – | – | – | %d | |" % (label, off, value_at(in_flight, tc + off)))
                continue
            L.append("| %s | %+g s | %s | %s | %s | %s | %s | %s | %d | %s |" % (
                label, off, e.get("limit"), e.get("in_flight"), e.get("waiting"), e.get("rate"),
                num(e.get("paused_seconds"), 1), ms(e.get("p95_seconds")), value_at(in_flight, tc + off),
                other_fields(e)))
    L.append("")


def header(L, info, a, contenders, cores):
    L.append("## Adaptive limit vs Scrapy AutoThrottle (%s)" % info["date"])
    L.append("")
    L.append("- command: `%s`" % info["command"])
    L.append("- politeproxy: %s (%s), commit %s; Scrapy %s, Python %s" % (
        info["politeproxy"], a.binary, info["commit"], info["scrapy"], info["python"]))
    L.append("- machine: %s, %d cores; load average at start %s; busy: %s; elapsed %.1f min" % (
        info["cpu"], info["nproc"], " ".join(info["loadavg_start"]), ", ".join(info["busy"]) or "none seen",
        info["elapsed_s"] / 60))
    L.append("- origin: capacity_origin.py, schedules %s, %g s per phase, service %s with mean %g s, wall at "
             "2C waiting (503, Retry-After: %d), seed %d + repeat; core %d (with the proxy); Scrapy on core %d" % (
                 ", ".join(":".join(map(str, s)) for s in a.schedules), a.phase_seconds, "/".join(a.shapes), a.mean,
                 a.retry_after, a.seed, cores[0], cores[1]))
    L.append("- politeproxy-8 host entry: concurrency 8, rate 400, burst 8, queue max_wait 60s, "
             "**adaptive.grow_interval %s, backoff.initial %s**, the rest as defaults; workers 1" % (
                 a.proxy_grow_interval, a.proxy_backoff_initial))
    L.append("- contenders (Scrapy settings): " + "; ".join(
        "%s: %s" % (c, ", ".join("%s=%s" % kv for kv in contenders[c].settings.items())) for c in a.contenders))
    L.append("- %d repeat(s), interleaved; figures are medians over repeats; 'to within 1 of C' holds %g s%s" % (
        a.repeats, SETTLE_HOLD, ", excursions out of the band up to %g ms ignored" % a.settle_blip_ms
        if a.settle_blip_ms else " (strict: any excursion breaks it)"))
    L.append("")


FOOTNOTES = [
    "Goodput share = 200s finished in the phase / (phase seconds x min(C, L) / mean service), L = the contender's "
    "configured level: 8 (the AutoThrottle contenders' and fixed-8's per-domain cap, politeproxy-8's concurrency). "
    "politeproxy-defaults is held to its own ceiling, min(2 / mean, rate 1/s) = 1 req/s at a 0.1 s mean, not to C.",
    "Scrapy itself leaves a few ms between a response and the next request on the same slot, so even fixed-8 stays "
    "a little under 100% at C=8: its figure there is the practical ceiling of a Scrapy client on this machine.",
    "Time to within 1 of C counts from the phase's start; for the first phase that is the crawl's start (AutoThrottle "
    "begins at its 5 s start delay). In flight = in service + waiting at the origin. The 1 s it must hold is not broken "
    "by excursions out of the band no longer than --settle-blip-ms (the hand-off from a response to the next request; "
    "with constant service the requests finish in step, so a strict reading finds no contender ever settled).",
    "503s count arrivals refused at the origin's wall; a 503 the proxy made itself (queue full or max_wait) never "
    "reaches the origin: it shows in the run table's Scrapy statuses only (Scrapy's count includes responses after "
    "the schedule, while it closed).",
    "politeproxy-defaults runs with the unknown-host defaults as they come (adaptive.grow_interval 30s, "
    "backoff.initial 5s): the CLI's grow interval and backoff apply to the politeproxy-8 host entry only.",
]


def summarize(runs, failures, info, a, contenders, cores):
    """The markdown report. runs, failures, info and a (the arguments) as a run keeps them in
    its JSON, each completed run's "result" with its "in_flight" step series; contenders:
    {name: Contender}; cores: (the origin's and proxy's, Scrapy's)."""
    L = []
    header(L, info, a, contenders, cores)
    by_cell = cells(runs)
    for shape in a.shapes:
        for schedule in a.schedules:
            L.append("### %s service, schedule %s (%g s per phase)" % (shape, ":".join(map(str, schedule)),
                                                                      a.phase_seconds))
            L.append("")
            phase_table(L, by_cell, shape, tuple(schedule), a.contenders)
            goals_table(L, by_cell, shape, tuple(schedule))
    L.append("### Runs, in the order they ran")
    L.append("")
    totals_table(L, runs)
    proxy_runs = [r for r in runs if "result" in r and contenders[r["contender"]].proxy]
    if proxy_runs:
        L.append("### Limit traces around each capacity change (politeproxy /hosts, on the origin's clock)")
        L.append("")
        for run in proxy_runs:
            limit_trace(L, run)
    L.append("Notes:")
    L.append("")
    L.extend("- " + f for f in FOOTNOTES)
    L.append("")
    if failures:
        L.append("### Failures")
        L.append("")
        L.extend("- " + f.replace("\n", " ")[:400] for f in failures)
        L.append("")
    return "\n".join(L)
