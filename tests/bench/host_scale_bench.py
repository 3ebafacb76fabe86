#!/usr/bin/python3
"""A million hosts: what politeproxy holds for each one it has seen, what a scrape of
/metrics costs then, and how long forgetting them all stalls the worker.

    /usr/bin/python3 tests/bench/host_scale_bench.py [--hosts 1000000] [--binary build/politeproxy]
                                                     [--base-binary OTHER] [--out FILE.md]

For each binary (--base-binary too, when given, in the same run): the cost config
(bench_plan.cost_config, one worker on core 1) with `limits.host_idle_ttl: 10m` and
`metrics.max_host_series: 50`; wrk (hosts.lua "once", 64 connections) sends one request
to each of --hosts names `mN.bench.test` (resolve: table, so no DNS), nginx answers 1 KiB.
Then, with a probe on one keep-alive connection sending requests back to back to one
more host (so the worker's pauses show as the probe's latency, as a client sees them):
  - RSS: VmRSS before the load and after it (before any scrape): bytes per host;
  - idle CPU: the proxy's CPU time per second over 5 s with the probe held (nothing to
    serve): what holding the hosts costs by itself;
  - scrape: one GET /metrics, its time, the peak RSS during it (VmHWM reset before), the
    probe's longest latency during it, and VmRSS 2 s after it (what a process that is
    scraped holds for its hosts);
  - /hosts: one GET of every host's full view, its time and the probe's longest latency
    during it;
  - status page: the request the binary's own status page makes every second (its
    /status.js says which: one page of /api/hosts, or all of /hosts before 2026-12-06),
    its time, answer size and peak RSS, and the probe's longest latency during it;
  - reload: SIGHUP with the config unchanged; the probe's longest latency in the 4 s after;
  - eviction: the config rewritten with host_idle_ttl 5s and SIGHUP; the probe runs
    until the proxy's RSS has stopped falling; the longest probe latency after the
    reload (the worker's longest stall) against the probe's median and longest before;
    then one scrape checks that only the probe's host is left.
Needs the bench packages (scripts/install-deps.sh --bench)."""
import argparse
import datetime
import http.client
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench as RB  # noqa: E402


def config(idle_ttl):
    return RB.cost_config(limits={"host_idle_ttl": idle_ttl}, metrics={"max_host_series": 50})


class Probe(threading.Thread):
    """Requests back to back on one keep-alive connection; (end time, latency) of each."""

    def __init__(self, proxy_port, origin_port):
        super().__init__(daemon=True)
        self.port, self.url = proxy_port, "http://probe.bench.test:%d/1k" % origin_port
        self.samples, self.stop_flag, self.error = [], threading.Event(), None
        self.go = threading.Event()  # cleared: the probe waits (between requests)
        self.go.set()

    def run(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            while not self.stop_flag.is_set():
                if not self.go.is_set():
                    self.go.wait(1.0)
                    continue
                t0 = time.monotonic()
                conn.request("GET", self.url, headers={"Host": "probe.bench.test"})
                r = conn.getresponse()
                r.read()
                t1 = time.monotonic()
                if r.status != 200:
                    raise RuntimeError("probe: status %d" % r.status)
                self.samples.append((t1, t1 - t0))
        except Exception as e:  # reported by the run
            self.error = "%s: %s" % (type(e).__name__, e)

    def between(self, t0, t1):
        """Latencies of the requests that overlapped [t0, t1]."""
        return [lat for end, lat in self.samples if end >= t0 and end - lat <= t1]

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=35)


def idle_cpu_ms_per_s(pid, probe, seconds=5.0):
    """The proxy's CPU time per second with nothing to serve (the probe held): what
    holding the hosts costs by itself (housekeeping's passes over them)."""
    probe.go.clear()
    time.sleep(1.0)
    c0, t0 = RB.proc_cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = RB.proc_cpu_seconds(pid), time.monotonic()
    probe.go.set()
    return 1000 * (c1 - c0) / (t1 - t0)


def rss_settled(pid, quiet_s=3.0, limit_s=60.0):
    """Waits until VmRSS has not fallen by more than 1 MiB for quiet_s (or limit_s passed)."""
    start = last_change = time.monotonic()
    last = RB.proc_status_kb(pid, "VmRSS")
    while time.monotonic() - last_change < quiet_s and time.monotonic() - start < limit_s:
        time.sleep(0.25)
        now = RB.proc_status_kb(pid, "VmRSS")
        if last - now > 1024:
            last, last_change = now, time.monotonic()
    return time.monotonic() - start


def fetch_apart(url):
    """GET url by curl, in a process of its own: (start, end, bytes). Read here, the hundreds
    of MB of /hosts would hold Python's lock while they are decoded, and the probe (a thread
    of this process) with it: a stall of the bench's own, not of the proxy."""
    t0 = time.monotonic()
    out = subprocess.run(["curl", "-sS", "--noproxy", "*", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                          "--max-time", "120", url], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    t1 = time.monotonic()
    if out[0] != "200":
        raise RuntimeError("GET %s: %s" % (url, out[0]))
    return t0, t1, int(out[1])


def status_page(pp, probe):
    admin = "http://127.0.0.1:%d" % pp.admin
    script = RB.http_get(admin + "/status.js")
    path = "/api/hosts?sort=waiting&limit=500" if "fetch('/api/hosts?sort=waiting" in script else "/hosts"
    RB.reset_peak_rss(pp.pid)
    t0, t1, size = fetch_apart(admin + path)
    peak = RB.proc_status_kb(pp.pid, "VmHWM")
    time.sleep(2.0)  # as for the scrape: a held-up probe request is counted once it ends
    return {"page_path": path, "page_seconds": t1 - t0, "page_mb": size / 1e6, "page_peak_rss_kb": peak,
            "page_probe_max_ms": 1000 * max(probe.between(t0, t1) or [0])}


def full_hosts(pp, probe):
    t0, t1, size = fetch_apart("http://127.0.0.1:%d/hosts" % pp.admin)
    time.sleep(2.0)
    return {"hosts_seconds": t1 - t0, "hosts_mb": size / 1e6,
            "hosts_probe_max_ms": 1000 * max(probe.between(t0, t1) or [0])}


def one_binary(bench, a, name, binary):
    pp = bench.start_politeproxy(name, config("10m"), binary)
    res = {"binary": binary}
    probe = None
    try:
        probe = Probe(pp.port, bench.nginx_port)
        probe.start()
        time.sleep(1.0)
        base_rss = RB.proc_status_kb(pp.pid, "VmRSS")
        t0 = time.monotonic()
        w = bench.run_wrk("http://127.0.0.1:%d/" % pp.port, 64, 3600, "hosts.lua",
                          ["once", bench.nginx_port, "/1k", a.hosts, 1, 1024, "m"], until=RB.wrk_threads_done())
        res["load_seconds"] = time.monotonic() - t0
        if w.get("error"):
            raise RuntimeError("load: %s" % w["error"])
        time.sleep(1.0)
        loaded_rss = RB.proc_status_kb(pp.pid, "VmRSS")
        res.update(base_rss_kb=base_rss, loaded_rss_kb=loaded_rss,
                   bytes_per_host=(loaded_rss - base_rss) * 1024.0 / a.hosts)
        res["idle_cpu_ms_per_s"] = idle_cpu_ms_per_s(pp.pid, probe)

        RB.reset_peak_rss(pp.pid)
        s0 = time.monotonic()
        tracked = RB.metric_sum(bench.metrics(pp), "politeproxy_hosts_tracked")
        s1 = time.monotonic()
        res.update(scrape_seconds=s1 - s0, scrape_peak_rss_kb=RB.proc_status_kb(pp.pid, "VmHWM"), tracked=tracked)
        if tracked < a.hosts:
            raise RuntimeError("only %d hosts tracked after the load of %d" % (tracked, a.hosts))

        time.sleep(2.0)
        # Read after the pause: a probe request the scrape held up ends after the scrape's
        # answer, and is counted only once it has ended.
        res["scrape_probe_max_ms"] = 1000 * max(probe.between(s0, s1) or [0])
        res["scrape_after_rss_kb"] = RB.proc_status_kb(pp.pid, "VmRSS")
        res.update(status_page(pp, probe))
        res.update(full_hosts(pp, probe))
        before = probe.between(time.monotonic() - 1.5, time.monotonic())
        # A reload that changes nothing: what re-applying the config to every host costs.
        r0 = time.monotonic()
        os.kill(pp.pid, signal.SIGHUP)
        time.sleep(4.0)
        res["probe_max_reload_ms"] = 1000 * max(probe.between(r0, time.monotonic()) or [float("nan")])
        with open(pp.config, "w") as f:
            f.write(config("5s"))
        os.kill(pp.pid, signal.SIGHUP)
        h = time.monotonic()
        time.sleep(6.0)  # the TTL, then the next housekeeping tick
        res["evict_seconds"] = 6.0 + rss_settled(pp.pid)
        after = probe.between(h, time.monotonic())
        probe.stop()
        if probe.error:
            raise RuntimeError(probe.error)
        if not before or not after:
            raise RuntimeError("the probe answered nothing in a window (%d before, %d after)" % (len(before), len(after)))
        res.update(after_rss_kb=RB.proc_status_kb(pp.pid, "VmRSS"),
                   probe_p50_ms=1000 * statistics.median(before), probe_max_before_ms=1000 * max(before),
                   probe_max_evicting_ms=1000 * max(after), probe_requests_evicting=len(after))
        res["tracked_after"] = RB.metric_sum(bench.metrics(pp), "politeproxy_hosts_tracked")
        if res["tracked_after"] > 1:
            raise RuntimeError("%d hosts still tracked after eviction" % res["tracked_after"])
    finally:
        if probe and probe.is_alive():
            probe.stop()
        bench.procs.stop(pp)
    RB.log("%s: %.0f B/host (RSS %d -> %d KiB), idle CPU %.1f ms/s, scrape %.2f s (peak %d KiB, probe max %.1f ms, RSS after %d KiB), "
           "status page %s %.2f s %.1f MB (peak %d KiB, probe max %.1f ms), /hosts %.2f s %.1f MB (probe max %.1f ms), "
           "probe p50 %.2f ms, "
           "max %.1f ms before, %.1f ms in a reload, %.1f ms in a reload + eviction (%d requests), RSS after %d KiB" % (
               name, res["bytes_per_host"], res["base_rss_kb"], res["loaded_rss_kb"], res["idle_cpu_ms_per_s"],
               res["scrape_seconds"],
               res["scrape_peak_rss_kb"], res["scrape_probe_max_ms"], res["scrape_after_rss_kb"],
               res["page_path"], res["page_seconds"], res["page_mb"], res["page_peak_rss_kb"], res["page_probe_max_ms"],
               res["hosts_seconds"], res["hosts_mb"], res["hosts_probe_max_ms"],
               res["probe_p50_ms"],
               res["probe_max_before_ms"], res["probe_max_reload_ms"], res["probe_max_evicting_ms"],
               res["probe_requests_evicting"],
               res["after_rss_kb"]))
    return res


def report(a, results, elapsed, failures):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    lines = ["# politeproxy host scale (%s)" % stamp, "",
             "%d hosts seen once each (64 connections), one worker on core 1; a probe on one keep-alive "
             "connection throughout. %.0f s in all." % (a.hosts, elapsed), "",
             "| binary | B per host | RSS loaded | idle CPU | scrape s | scrape peak RSS | probe max in scrape | RSS after scrape | "
             "status page asks | its s | its MB | its peak RSS | probe max in it | /hosts s | probe max in /hosts | probe p50 | "
             "probe max before | probe max in reload | probe max in reload + eviction | RSS after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append("| %s | %.0f | %.0f MiB | %.1f ms/s | %.2f | %.0f MiB | %.1f ms | %.0f MiB | `%s` | %.2f | %.1f | %.0f MiB | %.1f ms | "
                     "%.2f | %.1f ms | "
                     "%.2f ms | %.1f ms | %.1f ms | **%.1f ms** | %.0f MiB |" % (
            name, r["bytes_per_host"], r["loaded_rss_kb"] / 1024, r["idle_cpu_ms_per_s"], r["scrape_seconds"], r["scrape_peak_rss_kb"] / 1024,
            r["scrape_probe_max_ms"], r["scrape_after_rss_kb"] / 1024, r["page_path"], r["page_seconds"], r["page_mb"],
            r["page_peak_rss_kb"] / 1024, r["page_probe_max_ms"], r["hosts_seconds"], r["hosts_probe_max_ms"],
            r["probe_p50_ms"], r["probe_max_before_ms"],
            r["probe_max_reload_ms"],
            r["probe_max_evicting_ms"],
            r["after_rss_kb"] / 1024))
    if failures:
        lines += ["", "Failures:"] + ["- " + f for f in failures]
    text = "\n".join(lines) + "\n"
    out = a.out or "/tmp/politeproxy-host-scale-%s.md" % stamp
    with open(out, "w") as f:
        f.write(text)
    print(text + "\nwritten to " + out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000000)
    ap.add_argument("--binary", default=os.path.join(RB.REPO, "build", "politeproxy"))
    ap.add_argument("--base-binary", default=None, help="another politeproxy, measured in the same run")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.scenarios, a.polite_delay = [], 0.1  # what Bench.start_nginx reads
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            sys.exit("%s not found (scripts/install-deps.sh --bench)" % tool)
    os.sched_setaffinity(0, {RB.plan.LOAD_CPU})
    workdir = tempfile.mkdtemp(prefix="pp-host-scale-")
    os.chmod(workdir, 0o755)
    bench = RB.Bench(a, workdir)
    signal.signal(signal.SIGTERM, lambda signo, _f: (_ for _ in ()).throw(RB.Interrupted("signal %d" % signo)))
    results, started = {}, time.monotonic()

    def body():
        bench.start_nginx()
        binaries = [("new", a.binary)] + ([("base", a.base_binary)] if a.base_binary else [])
        for name, binary in binaries:
            try:
                results[name] = one_binary(bench, a, name, binary)
            except RuntimeError as e:
                bench.fail(name, str(e))
    bench.guarded(body)
    report(a, results, time.monotonic() - started, bench.failures)
    shutil.rmtree(workdir, ignore_errors=True) if not bench.failures else print("kept " + workdir)
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
