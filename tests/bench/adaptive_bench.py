#!/usr/bin/python3
"""The adaptive limit against Scrapy's AutoThrottle: who follows an origin whose capacity
changes, without queueing at it or being refused?

    /usr/bin/python3 tests/bench/adaptive_bench.py            # 2 shapes x 5 contenders x 120 s
    /usr/bin/python3 tests/bench/adaptive_bench.py --quick    # 1 shape, 10 s phases

Method. The origin is capacity_origin.py: C workers, a FIFO queue, a wall at 2C waiting
(503 + Retry-After), and C following a schedule (default 8, 2, 8 for --phase-seconds
each). The client is always Scrapy 2.8 (adaptive_spider.py: far more unique URLs than it
can fetch, every response counted, nothing retried); what varies is who paces it:
  autothrottle          direct; AUTOTHROTTLE_ENABLED with Scrapy's defaults (target
                        concurrency 1.0, start delay 5 s, max delay 60 s); per-domain cap 8
  autothrottle-t4       the same with AUTOTHROTTLE_TARGET_CONCURRENCY 4
  fixed-8               direct; 8 per domain, no delay, no AutoThrottle
  politeproxy-8         through politeproxy: Scrapy keeps 64 requests outstanding, the
                        proxy's host entry (concurrency 8, rate 400, burst 8, adaptive
                        grow_interval --proxy-grow-interval, backoff.initial
                        --proxy-backoff-initial) decides how many reach the origin
  politeproxy-defaults  the same proxy, no host entry: the unknown-host defaults
                        (concurrency 2, rate 1/s)
Runs are interleaved (repeat > shape > schedule > contender, the contender order rotated
per repeat) so that drift on this shared machine hits every contender alike. Each run
has its own origin (and proxy); the spider starts the origin's clock (/__start) when it
opens, so Scrapy's start-up time is not in the schedule. Scrapy runs on core 0 with this
script, the origin and the proxy on core 1. While a proxy run goes, GET /hosts on the
admin port is polled every 100 ms and the whole object for host "127.0.0.1" is kept,
timed on the origin's clock (the limit trace).

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

Exit status 0 when every run completed; 1 otherwise (the report's "Failures" says why).
The report goes to stdout and /tmp/politeproxy-adaptive-DATE.md, the raw figures (every
origin event and /hosts sample) to the .json beside it. Standard library, python3-yaml
and python3-scrapy (Debian); processes handled by run_bench.py's Procs (by PID,
PR_SET_PDEATHSIG), loopback only, ports picked at run time.
"""

import argparse
import bisect
import collections
import datetime
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as rb  # noqa: E402  (Procs, log, wait_log_line, http_get, busy_processes)

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-scrapy
ORIGIN_RE = re.compile(r"capacity_origin: listening (\d+)")
STARTED_RE = re.compile(r"adaptive_spider: started ([0-9.]+)")
HOST_KEY = "127.0.0.1"
POLL_SECONDS = 0.1
SETTLE_HOLD = 1.0           # in flight must stay within 1 of C this long to count as reached
QUEUE_LEVEL = 0.005        # mean origin queues this close are level (below the report's precision)
TRACE_OFFSETS = [-1, 0.5, 1, 2, 3, 5, 10]
SPIDER_EXIT_WAIT = 3.0      # after the schedule, how long Scrapy may take to close by itself
ORIGIN_CPU, SCRAPY_CPU = 1, 0
# /hosts fields shown in their own columns or not worth showing; any other field the proxy
# adds (baseline, recent latency, reason of the last change...) goes to the "other" column
HOSTS_SHOWN = {"key", "limit", "configured_limit", "stream_ceiling", "upstream_protocol", "in_flight", "waiting",
               "rate", "configured_rate", "paused_until", "paused_seconds", "override_reason", "p95_seconds",
               "enforce"}

Contender = collections.namedtuple("Contender", "name settings proxy level rate")
_DIRECT = {"CONCURRENT_REQUESTS_PER_DOMAIN": 8, "CONCURRENT_REQUESTS": 16}
_VIA_PROXY = {"CONCURRENT_REQUESTS_PER_DOMAIN": 64, "CONCURRENT_REQUESTS": 64, "AUTOTHROTTLE_ENABLED": False}
CONTENDERS = [
    Contender("autothrottle", dict(_DIRECT, AUTOTHROTTLE_ENABLED=True), None, 8, math.inf),
    Contender("autothrottle-t4", dict(_DIRECT, AUTOTHROTTLE_ENABLED=True, AUTOTHROTTLE_TARGET_CONCURRENCY=4),
              None, 8, math.inf),
    Contender("fixed-8", dict(_DIRECT, AUTOTHROTTLE_ENABLED=False, DOWNLOAD_DELAY=0), None, 8, math.inf),
    Contender("politeproxy-8", _VIA_PROXY, "hosts", 8, 400.0),
    Contender("politeproxy-defaults", _VIA_PROXY, "defaults", 2, 1.0),
]
BY_NAME = {c.name: c for c in CONTENDERS}


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
# processes
# --------------------------------------------------------------------------------------
class HostsPoller(threading.Thread):
    """GET /hosts every POLL_SECONDS; keeps [t - t0, object for HOST_KEY or None]."""

    def __init__(self, admin_port, t0):
        super().__init__(daemon=True)
        self.url = "http://127.0.0.1:%d/hosts" % admin_port
        self.t0 = t0
        self.samples = []
        self.errors = 0
        self.done = threading.Event()

    def run(self):
        tick = time.monotonic()
        while not self.done.is_set():
            try:
                hosts = json.loads(rb.http_get(self.url, timeout=2.0))
                entry = next((h for h in hosts if h.get("key") == HOST_KEY), None)
                self.samples.append([round(time.monotonic() - self.t0, 3), entry])
            except Exception:
                self.errors += 1
            tick += POLL_SECONDS
            self.done.wait(max(0.0, tick - time.monotonic()))

    def stop(self):
        self.done.set()
        self.join(5)


def proxy_config(args, contender):
    cfg = {"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", "workers": 1, "drain_timeout": "1s",
           "security": {"allow_destinations": ["127.0.0.0/8"]}, "hosts": {}}
    if contender.proxy == "hosts":
        cfg["hosts"][HOST_KEY] = {
            "concurrency": contender.level, "rate": contender.rate, "burst": 8, "queue": {"max_wait": "60s"},
            "reason": "adaptive benchmark: capacity_origin on loopback, at most 8 workers",
            "adaptive": {"grow_interval": args.proxy_grow_interval},
            "backoff": {"initial": args.proxy_backoff_initial},
        }
    return yaml.safe_dump(cfg, sort_keys=False)


class Runner:
    def __init__(self, args, workdir):
        self.a = args
        self.dir = workdir
        self.procs = rb.Procs(workdir)
        self.runs = []
        self.failures = []

    def fail(self, what, why):
        self.failures.append("%s: %s" % (what, why))
        rb.log("FAILED %s: %s" % (what, why))

    def start_origin(self, name, shape, schedule, seed):
        spec = ",".join("%d:%g" % (c, self.a.phase_seconds) for c in schedule)
        proc = self.procs.start(name + "-origin", [
            PYTHON, os.path.join(HERE, "capacity_origin.py"), "--port", "0", "--schedule", spec,
            "--service", shape, "--mean", str(self.a.mean), "--seed", str(seed),
            "--retry-after", str(self.a.retry_after)], ORIGIN_CPU)
        proc.port = int(rb.wait_log_line(proc, ORIGIN_RE).group(1))
        return proc

    def start_proxy(self, name, contender):
        path = os.path.join(self.dir, name + "-politeproxy.yaml")
        with open(path, "w") as f:
            f.write(proxy_config(self.a, contender))
        proc = self.procs.start(name + "-politeproxy", [self.a.binary, "--config", path], ORIGIN_CPU)
        m = rb.wait_log_line(proc, rb.LISTEN_RE)
        proc.port, proc.admin = int(m.group(2)), int(m.group(4))
        return proc

    def start_spider(self, name, contender, origin, proxy, seconds):
        stats_file = os.path.join(self.dir, name + "-scrapy.json")
        argv = [PYTHON, "-m", "scrapy", "runspider", os.path.join(HERE, "adaptive_spider.py"),
                "-a", "origin=http://127.0.0.1:%d" % origin.port, "-a", "stats_file=" + stats_file,
                "-s", "CLOSESPIDER_TIMEOUT=%g" % seconds]
        if proxy:
            argv += ["-a", "proxy=http://127.0.0.1:%d" % proxy.port]
        for key, value in contender.settings.items():
            argv += ["-s", "%s=%s" % (key, value)]
        proc = self.procs.start(name + "-scrapy", argv, SCRAPY_CPU)
        proc.stats_file = stats_file
        return proc

    def run_one(self, repeat, shape, schedule, contender):
        name = "r%d-%s-%s-%s" % (repeat, shape, "_".join(map(str, schedule)), contender.name)
        seconds = self.a.phase_seconds * len(schedule)
        run = {"name": name, "repeat": repeat, "shape": shape, "schedule": schedule, "contender": contender.name}
        rb.log("run %s (%.0f s)" % (name, seconds))
        poller = spider = proxy = origin = None
        try:
            origin = self.start_origin(name, shape, schedule, self.a.seed + repeat)
            proxy = self.start_proxy(name, contender) if contender.proxy else None
            spider = self.start_spider(name, contender, origin, proxy, seconds)
            t0 = float(rb.wait_log_line(spider, STARTED_RE, timeout=60).group(1))
            if proxy:
                poller = HostsPoller(proxy.admin, t0)
                poller.start()
            self.wait_schedule(spider, t0 + seconds)
            run["scrapy_closed_itself"] = self.wait_exit(spider, SPIDER_EXIT_WAIT)
            self.procs.stop(spider)
            if poller:
                poller.stop()
                run["hosts"], run["hosts_errors"] = poller.samples, poller.errors
            if proxy:
                metrics = rb.parse_metrics(rb.http_get("http://127.0.0.1:%d/metrics" % proxy.admin))
                run["proxy_requests"] = sum(v for n, lab, v in metrics
                                            if n == "politeproxy_requests_total" and lab.get("host") == HOST_KEY)
            run["origin"] = json.loads(rb.http_get("http://127.0.0.1:%d/__stats" % origin.port, timeout=30))
            run["spider"] = self.read_json(spider.stats_file)
            run["result"] = analyze(run["origin"], contender, self.a.settle_blip_ms / 1000.0)
            self.check_path(run, contender)
        except (KeyboardInterrupt, rb.Interrupted):
            raise
        except Exception as e:
            run["error"] = "%s: %s" % (type(e).__name__, e)
            self.fail(name, run["error"])
        finally:
            if poller:
                poller.stop()
            for proc in (spider, proxy, origin):
                if proc:
                    self.procs.stop(proc)
        self.runs.append(run)

    @staticmethod
    def wait_schedule(spider, until):
        while time.monotonic() < until:
            if not spider.alive():
                raise RuntimeError("Scrapy exited (%s) before the schedule ended:\n%s"
                                   % (spider.popen.returncode, spider.log_tail()))
            time.sleep(0.2)

    @staticmethod
    def wait_exit(proc, seconds):
        try:
            proc.popen.wait(seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    @staticmethod
    def read_json(path):
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None  # Scrapy was stopped before it closed

    @staticmethod
    def check_path(run, contender):
        """Proxy runs must have gone through the proxy, direct runs must not."""
        sp = run.get("spider")
        if contender.proxy:
            seen = any(entry for _, entry in run["hosts"])
            if not seen or not run.get("proxy_requests"):
                raise RuntimeError("the proxy never saw host %s (/hosts samples: %d, requests_total: %s)"
                                   % (HOST_KEY, len(run["hosts"]), run.get("proxy_requests")))
            if sp and sp["via_proxy"] < sum(sp["statuses"].values()):
                raise RuntimeError("%d of %d responses lack Proxy-Status"
                                   % (sum(sp["statuses"].values()) - sp["via_proxy"], sum(sp["statuses"].values())))
        elif sp and sp["via_proxy"]:
            raise RuntimeError("%d responses of a direct run carry Proxy-Status" % sp["via_proxy"])

    def run(self):
        names = list(self.a.contenders)
        for repeat in range(1, self.a.repeats + 1):
            order = names[(repeat - 1) % len(names):] + names[:(repeat - 1) % len(names)]
            for shape in self.a.shapes:
                for schedule in self.a.schedules:
                    for name in order:
                        self.run_one(repeat, shape, schedule, BY_NAME[name])


# --------------------------------------------------------------------------------------
# report
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


def header(L, info, a):
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
                 a.retry_after, a.seed, ORIGIN_CPU, SCRAPY_CPU))
    L.append("- politeproxy-8 host entry: concurrency 8, rate 400, burst 8, queue max_wait 60s, "
             "**adaptive.grow_interval %s, backoff.initial %s**, the rest as defaults; workers 1" % (
                 a.proxy_grow_interval, a.proxy_backoff_initial))
    L.append("- contenders (Scrapy settings): " + "; ".join(
        "%s: %s" % (c, ", ".join("%s=%s" % kv for kv in BY_NAME[c].settings.items())) for c in a.contenders))
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


def summarize(runner, info, a):
    L = []
    header(L, info, a)
    by_cell = cells(runner.runs)
    for shape in a.shapes:
        for schedule in a.schedules:
            L.append("### %s service, schedule %s (%g s per phase)" % (shape, ":".join(map(str, schedule)),
                                                                      a.phase_seconds))
            L.append("")
            phase_table(L, by_cell, shape, tuple(schedule), a.contenders)
            goals_table(L, by_cell, shape, tuple(schedule))
    L.append("### Runs, in the order they ran")
    L.append("")
    totals_table(L, runner.runs)
    proxy_runs = [r for r in runner.runs if "result" in r and BY_NAME[r["contender"]].proxy]
    if proxy_runs:
        L.append("### Limit traces around each capacity change (politeproxy /hosts, on the origin's clock)")
        L.append("")
        for run in proxy_runs:
            limit_trace(L, run)
    L.append("Notes:")
    L.append("")
    L.extend("- " + f for f in FOOTNOTES)
    L.append("")
    if runner.failures:
        L.append("### Failures")
        L.append("")
        L.extend("- " + f.replace("\n", " ")[:400] for f in runner.failures)
        L.append("")
    return "\n".join(L)


# --------------------------------------------------------------------------------------
def first_line(argv):
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30).stdout
        return out.strip().splitlines()[0]
    except Exception:
        return "?"


def machine_info(a):
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    commit = first_line(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([PYTHON, os.path.relpath(os.path.abspath(sys.argv[0]), REPO)] + sys.argv[1:]),
        "cpu": cpu, "nproc": os.cpu_count(), "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "busy": rb.busy_processes(), "politeproxy": first_line([a.binary, "--version"]),
        "commit": commit + ("+dirty" if dirty else ""),
        "scrapy": first_line([PYTHON, "-c", "import scrapy; print(scrapy.__version__)"]),
        "python": first_line([PYTHON, "--version"]).replace("Python ", ""),
    }


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "politeproxy"))
    ap.add_argument("--phase-seconds", type=float, default=40.0)
    ap.add_argument("--schedules", default="8:2:8", help="comma list of capacities separated by ':' (one phase each)")
    ap.add_argument("--shapes", default="constant,exponential", help="service-time shapes: constant, exponential")
    ap.add_argument("--contenders", default=",".join(c.name for c in CONTENDERS))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="10 s phases, constant service only")
    ap.add_argument("--mean", type=float, default=0.1, help="mean service time at the origin, seconds")
    ap.add_argument("--retry-after", type=int, default=1, help="Retry-After of the origin's 503s, seconds")
    ap.add_argument("--seed", type=int, default=1, help="service-time seed (plus the repeat number)")
    ap.add_argument("--proxy-grow-interval", default="1s", help="politeproxy-8: adaptive.grow_interval")
    ap.add_argument("--proxy-backoff-initial", default="1s", help="politeproxy-8: backoff.initial")
    ap.add_argument("--settle-blip-ms", type=float, default=20.0,
                    help="'to within 1 of C' ignores excursions out of [C-1, C+1] no longer than this"
                         " (default %(default)s; 0: any excursion breaks the 1 s)")
    ap.add_argument("--out", default=None, help="report path (default /tmp/politeproxy-adaptive-DATE.md)")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (configs, logs)")
    a = ap.parse_args()
    if a.quick:
        a.phase_seconds, a.shapes = 10.0, "constant"
    a.shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    a.schedules = [[int(c) for c in s.split(":")] for s in a.schedules.split(",") if s.strip()]
    a.contenders = [c.strip() for c in a.contenders.split(",") if c.strip()]
    for s in a.shapes:
        if s not in ("constant", "exponential"):
            ap.error("unknown shape %r" % s)
    for c in a.contenders:
        if c not in BY_NAME:
            ap.error("unknown contender %r (known: %s)" % (c, ", ".join(BY_NAME)))
    if any(c < 1 for s in a.schedules for c in s):
        ap.error("capacities must be >= 1")
    if any(BY_NAME[c].proxy for c in a.contenders) and not os.access(a.binary, os.X_OK):
        ap.error("%s not found: build politeproxy first" % a.binary)
    return a


def main():
    global ORIGIN_CPU
    a = parse_args()
    for key in [k for k in os.environ if k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")]:
        del os.environ[key]  # Scrapy's direct runs must be direct
    if (os.cpu_count() or 1) < 2:
        ORIGIN_CPU = SCRAPY_CPU
    os.sched_setaffinity(0, {SCRAPY_CPU})
    info = machine_info(a)
    if info["busy"] or float(info["loadavg_start"][0]) > 0.5:
        rb.log("warning: the machine is not quiet (load %s; %s)" % (info["loadavg_start"][0],
                                                                   ", ".join(info["busy"]) or "no compiler seen"))
    workdir = tempfile.mkdtemp(prefix="politeproxy-adaptive-")
    runner = Runner(a, workdir)

    def on_signal(signo, _frame):
        raise rb.Interrupted("signal %d" % signo)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    t0 = time.monotonic()
    try:
        runner.run()
    except (KeyboardInterrupt, rb.Interrupted) as e:
        runner.fail("benchmark", "interrupted (%s)" % (e or "Ctrl-C"))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        runner.procs.stop_all()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    info["elapsed_s"] = time.monotonic() - t0

    out = a.out or "/tmp/politeproxy-adaptive-%s.md" % datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    text = summarize(runner, info, a)
    with open(out, "w") as f:
        f.write(text + "\n")
    for run in runner.runs:  # the step series is derived from the events, which are kept
        run.get("result", {}).pop("in_flight", None)
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"info": info, "args": vars(a), "runs": runner.runs, "failures": runner.failures}, f)
    print(text)
    print("\nreport: %s (raw figures: %s.json)" % (out, os.path.splitext(out)[0]))
    if runner.failures or a.keep_tmp:
        print("logs and configs kept in %s" % workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if runner.failures else 0)


if __name__ == "__main__":
    main()
