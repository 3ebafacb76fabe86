#!/usr/bin/python3
"""The adaptive limit against Scrapy's AutoThrottle: who follows an origin whose capacity
changes, without queueing at it or being refused?

    /usr/bin/python3 tests/bench/adaptive_bench.py            # 2 shapes x 5 contenders x 120 s
    /usr/bin/python3 tests/bench/adaptive_bench.py --quick    # 1 shape, 10 s phases
    /usr/bin/python3 tests/bench/adaptive_bench.py --report-from /tmp/politeproxy-adaptive-DATE.json

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

The figures, taken from the origin's event log (the origin's view is the truth), and the
report are adaptive_report.py's; its docstring defines each metric.

Exit status 0 when every run completed; 1 otherwise (the report's "Failures" says why).
The report goes to stdout and /tmp/politeproxy-adaptive-DATE.md, the raw figures (every
origin event and /hosts sample) to the .json beside it; --report-from renders the report
again from such a .json without running anything. Standard library, python3-yaml
and python3-scrapy (Debian); processes handled by run_bench.py's Procs (by PID,
PR_SET_PDEATHSIG), loopback only, ports picked at run time.
"""

import argparse
import collections
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as rb  # noqa: E402  (Procs, log, wait_log_line, http_get, busy_processes)
import adaptive_report as ar  # noqa: E402  (analyze, summarize)

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-scrapy
ORIGIN_RE = re.compile(r"capacity_origin: listening (\d+)")
STARTED_RE = re.compile(r"adaptive_spider: started ([0-9.]+)")
HOST_KEY = "127.0.0.1"
POLL_SECONDS = 0.1
SPIDER_EXIT_WAIT = 3.0      # after the schedule, how long Scrapy may take to close by itself
ORIGIN_CPU, SCRAPY_CPU = 1, 0  # the origin's (and proxy's) core is Scrapy's on a 1-core machine

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
            run["result"] = ar.analyze(run["origin"], contender, self.a.settle_blip_ms / 1000.0)
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
    ap.add_argument("--report-from", metavar="FILE.json", default=None,
                    help="run nothing: render the report again from the raw JSON of an earlier run (to stdout, and"
                         " to --out if given); the run's own options come from the JSON, the ones here are ignored")
    a = ap.parse_args()
    if a.report_from:
        return a
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


def origin_cpu(nproc):
    """The origin's (and proxy's) core on a machine with nproc cores."""
    return ORIGIN_CPU if (nproc or 1) >= 2 else SCRAPY_CPU


def report_from(path, out):
    """The report of an earlier run, from its raw JSON: every completed run's figures are
    computed again from its origin events (the JSON keeps them, not the step series)."""
    with open(path) as f:
        raw = json.load(f)
    a, runs = argparse.Namespace(**raw["args"]), raw["runs"]
    changed = []
    for run in runs:
        if "result" in run:
            stored, run["result"] = run["result"], ar.analyze(run["origin"], BY_NAME[run["contender"]],
                                                               a.settle_blip_ms / 1000.0)
            if stored != {k: v for k, v in run["result"].items() if k != "in_flight"}:
                changed.append(run["name"])
    if changed:
        rb.log("warning: figures computed again differ from the stored ones in: " + ", ".join(changed))
    text = ar.summarize(runs, raw["failures"], raw["info"], a, BY_NAME,
                        (origin_cpu(raw["info"]["nproc"]), SCRAPY_CPU))
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    print(text)


def main():
    global ORIGIN_CPU
    a = parse_args()
    if a.report_from:
        report_from(a.report_from, a.out)
        return
    for key in [k for k in os.environ if k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")]:
        del os.environ[key]  # Scrapy's direct runs must be direct
    ORIGIN_CPU = origin_cpu(os.cpu_count())
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
    text = ar.summarize(runner.runs, runner.failures, info, a, BY_NAME, (ORIGIN_CPU, SCRAPY_CPU))
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
