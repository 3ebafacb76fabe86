"""Scenarios 2-4: politeproxy alone, as a mixin of bench_runner.Bench.

  2  politeness: 200 hosts x concurrency 2, origin delay 100 ms: achieved / 4000 req/s,
     and the origin's exact peak in flight per host
  3  memory: RSS per tracked host (100k hosts, then idle eviction) and per parked
     request (10k requests parked in 100 queues)
  4  the gate: build/gate_bench, ns per acquire+release at 1, 1k, 100k, 1M hosts (and 1k used of 1M)"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import bench_plan as plan
from bench_http import http_get, metric_sum
from bench_plan import HERE, render
from bench_procs import _child_setup, log, proc_status_kb, wrk_threads_done
from bench_report import fmt


class PoliteproxyAloneScenarios:
    """Mixed into Bench: uses its a (the arguments), procs, results, nginx_port,
    echo_module, fail, run_wrk, start_politeproxy, start_slow_origin and metrics."""

    # ---- scenario 2: politeness -------------------------------------------------------
    def scenario_politeness(self):
        a = self.a
        origin = pp = None
        stop_sampling = threading.Event()
        samples = {"n": 0, "max_in_flight": 0, "per_host_max": {}, "min_waiting": None, "steady": False,
                   "errors": 0, "limit_changes": 0}

        def sampler():
            while not stop_sampling.wait(0.25):
                try:
                    ms = self.metrics(pp)
                except Exception:
                    samples["errors"] += 1
                    continue
                samples["n"] += 1
                waiting = {}
                for n, labels, v in ms:
                    host = labels.get("host")
                    if n == "politeproxy_host_in_flight" and host:
                        samples["per_host_max"][host] = max(samples["per_host_max"].get(host, 0), v)
                        samples["max_in_flight"] = max(samples["max_in_flight"], v)
                    elif n == "politeproxy_host_waiting" and host:
                        waiting[host] = v
                    elif n == "politeproxy_limit_changes_total":
                        samples["limit_changes"] = max(samples["limit_changes"], v)
                if samples["steady"] and waiting:
                    low = min(waiting.get("h%d.bench.test" % i, 0) for i in range(a.polite_hosts))
                    samples["min_waiting"] = low if samples["min_waiting"] is None else min(samples["min_waiting"], low)

        try:
            origin = self.start_slow_origin()
            pp = self.start_politeproxy("politeproxy-politeness", render(
                "politeproxy-politeness.yaml.in", adaptive="true" if a.polite_adaptive else "false"))
            http_get("http://127.0.0.1:%d/__reset" % origin.port)
            sampler_thread = threading.Thread(target=sampler, daemon=True)
            sampler_thread.start()
            warm = 3.0
            result = {}

            def measure():
                time.sleep(warm)
                samples["steady"] = True
                s0, t0 = json.loads(http_get("http://127.0.0.1:%d/__stats" % origin.port)), time.monotonic()
                time.sleep(a.polite_duration)
                s1, t1 = json.loads(http_get("http://127.0.0.1:%d/__stats" % origin.port)), time.monotonic()
                samples["steady"] = False
                done = s1["completed"] - s0["completed"]
                result["origin_rps"] = done / (t1 - t0)
                if done:
                    result["mean_hold"] = (s1["hold_sum"] - s0["hold_sum"]) / done

            m = threading.Thread(target=measure, daemon=True)
            m.start()
            log("politeness: %d hosts x concurrency 2, delay %.0f ms, %d connections, %.0f s" % (
                a.polite_hosts, a.polite_delay * 1000, a.polite_connections, a.polite_duration))
            w = self.run_wrk("http://127.0.0.1:%d/" % pp.port, a.polite_connections, warm + a.polite_duration + 1.5,
                             "hosts.lua", ["rotate", origin.port, "/slow", a.polite_hosts, 2, 3], threads=2)
            m.join(5)
            stop_sampling.set()
            sampler_thread.join(5)
            st = json.loads(http_get("http://127.0.0.1:%d/__stats" % origin.port))
            ideal = a.polite_hosts * 2 / a.polite_delay
            res = {
                "hosts": a.polite_hosts, "connections": a.polite_connections, "delay_s": a.polite_delay,
                "duration_s": a.polite_duration, "ideal_rps": ideal, "origin_rps": result.get("origin_rps"),
                "achieved_ratio": (result["origin_rps"] / ideal) if result.get("origin_rps") else None,
                "origin_mean_hold_s": result.get("mean_hold"),
                "origin_ceiling_rps": (a.polite_hosts * 2 / result["mean_hold"]) if result.get("mean_hold") else None,
                "wrk": w, "origin": st, "origin_peak_per_host": st["peak"], "origin_hosts_seen": st["hosts"],
                "metrics_samples": samples["n"], "metrics_peak_in_flight": samples["max_in_flight"],
                "metrics_min_waiting_steady": samples["min_waiting"], "limit_changes": samples["limit_changes"],
                "adaptive": a.polite_adaptive,
            }
            self.results["politeness"] = res
            if w.get("error"):
                self.fail("politeness", w["error"])
            if st["peak"] > 2:
                self.fail("politeness", "origin saw %d requests in flight for one host (bound 2): %s"
                          % (st["peak"], st["worst_hosts"]))
            log("politeness: origin %.0f req/s of ideal %.0f (%.1f%%); origin peak per host %d; "
                "metrics peak %s; min waiting per host in steady state %s" % (
                    result.get("origin_rps") or 0, ideal, 100 * (res["achieved_ratio"] or 0), st["peak"],
                    samples["max_in_flight"], samples["min_waiting"]))
        finally:
            stop_sampling.set()
            for p in (pp, origin):
                if p:
                    self.procs.stop(p)

    # ---- scenario 3: memory -----------------------------------------------------------
    def warm_up_proxy(self, pp, conns):
        url = "http://warm.bench.test:%d/1k" % self.nginx_port
        r = self.run_wrk("http://127.0.0.1:%d/" % pp.port, conns, 1, "passthrough.lua", ["proxy", url, 1024])
        if r.get("error"):
            raise RuntimeError("warm-up through %s: %s" % (pp.name, r["error"]))

    def scenario_memory_hosts(self):
        a = self.a
        n = a.mem_hosts
        pp = None
        try:
            pp = self.start_politeproxy("politeproxy-memory", render(
                "politeproxy-memory.yaml.in", idle="5s", host_idle_ttl="10m"))
            self.warm_up_proxy(pp, 64)  # same connection count as the load: their sessions are in the baseline
            time.sleep(0.5)
            base_tracked = metric_sum(self.metrics(pp), "politeproxy_hosts_tracked")
            base_rss = proc_status_kb(pp.pid, "VmRSS")
            log("memory: %d distinct hosts through politeproxy (base RSS %d KiB, %d tracked)" % (n, base_rss, base_tracked))

            t0 = time.monotonic()
            w = self.run_wrk("http://127.0.0.1:%d/" % pp.port, 64, 300, "hosts.lua",
                             ["once", self.nginx_port, "/1k", n, 1, 1024, "m"], until=wrk_threads_done())
            load_s = time.monotonic() - t0
            if w.get("error"):
                self.fail("memory (hosts)", w["error"])
            time.sleep(0.5)
            loaded_rss = proc_status_kb(pp.pid, "VmRSS")  # before any scrape: a scrape allocates too
            loaded_hwm = proc_status_kb(pp.pid, "VmHWM")
            loaded_tracked = metric_sum(self.metrics(pp), "politeproxy_hosts_tracked")
            scraped_rss = proc_status_kb(pp.pid, "VmRSS")
            # eviction: the same file with host_idle_ttl 5s, applied by SIGHUP; no scrape
            # until the TTL and a housekeeping tick have passed
            with open(pp.config, "w") as f:
                f.write(render("politeproxy-memory.yaml.in", idle="5s", host_idle_ttl="5s"))
            os.kill(pp.pid, signal.SIGHUP)
            t_hup = time.monotonic()
            time.sleep(7)
            after_tracked = loaded_tracked
            while True:
                after_tracked = metric_sum(self.metrics(pp), "politeproxy_hosts_tracked")
                if after_tracked == 0 or time.monotonic() - t_hup > 30:
                    break
                time.sleep(1)
            evict_s = time.monotonic() - t_hup
            time.sleep(1)
            after_rss = proc_status_kb(pp.pid, "VmRSS")
            grown = loaded_tracked - base_tracked
            res = {
                "hosts": n, "load_seconds": load_s, "load_rps": w.get("rps"), "wrk": w,
                "base_rss_kb": base_rss, "base_tracked": base_tracked,
                "loaded_rss_kb": loaded_rss, "loaded_hwm_kb": loaded_hwm, "loaded_tracked": loaded_tracked,
                "rss_after_one_scrape_kb": scraped_rss,
                "bytes_per_host": (loaded_rss - base_rss) * 1024 / grown if grown > 0 else None,
                "after_rss_kb": after_rss, "after_tracked": after_tracked, "evict_seconds": evict_s,
                "returned_ratio": ((loaded_rss - after_rss) / (loaded_rss - base_rss)) if loaded_rss > base_rss else None,
            }
            self.results["memory"] = res
            if loaded_tracked < base_tracked + n:
                self.fail("memory (hosts)", "only %d hosts tracked after the load (expected %d)" % (loaded_tracked, n))
            if after_tracked != 0:
                self.fail("memory (hosts)", "%d hosts still tracked %.0f s after host_idle_ttl 5s was applied"
                          % (after_tracked, evict_s))
            log("memory: %d tracked, RSS %d -> %d KiB (%s B/host); after eviction %d tracked, RSS %d KiB" % (
                loaded_tracked, base_rss, loaded_rss, fmt(res["bytes_per_host"], 0), after_tracked, after_rss))
        finally:
            if pp:
                self.procs.stop(pp)

    def scenario_memory_parked(self):
        a = self.a
        n, hosts = a.parked, a.park_hosts
        pp = load = origin = None
        try:
            if self.echo_module:
                origin_port, origin_name = self.nginx_port, "nginx (echo_sleep 600)"
            else:
                origin = self.start_slow_origin("slow_origin-park")
                origin_port, origin_name = origin.port, "slow_origin.py (/park)"
            pp = self.start_politeproxy("politeproxy-parked", render("politeproxy-parked.yaml.in"))
            self.warm_up_proxy(pp, 64)
            time.sleep(0.5)
            base_rss = proc_status_kb(pp.pid, "VmRSS")
            log("parked: %d requests over %d hosts (concurrency 1) through politeproxy (base RSS %d KiB)"
                % (n, hosts, base_rss))
            load = self.procs.start("park_load", [sys.executable, os.path.join(HERE, "park_load.py"),
                                                  "--proxy-port", str(pp.port), "--origin-port", str(origin_port),
                                                  "--connections", str(n), "--hosts", str(hosts)],
                                    plan.LOAD_CPU, stdin=subprocess.PIPE)
            deadline = time.monotonic() + 60
            waiting = in_flight = 0
            while time.monotonic() < deadline:
                time.sleep(0.5)
                ms = self.metrics(pp)
                waiting = metric_sum(ms, "politeproxy_host_waiting")
                in_flight = metric_sum(ms, "politeproxy_host_in_flight")
                if waiting + in_flight >= n or not load.alive():
                    break
            time.sleep(1)
            ms = self.metrics(pp)
            waiting = metric_sum(ms, "politeproxy_host_waiting")
            in_flight = metric_sum(ms, "politeproxy_host_in_flight")
            parked_rss = proc_status_kb(pp.pid, "VmRSS")
            load.popen.stdin.close()  # park_load closes every connection and exits
            try:
                load.popen.wait(20)
            except subprocess.TimeoutExpired:
                pass
            load_out = load.log_tail(5)
            self.procs.stop(load)
            released = waiting
            t0 = time.monotonic()
            while time.monotonic() - t0 < 15:
                time.sleep(0.5)
                released = metric_sum(self.metrics(pp), "politeproxy_host_waiting")
                if released == 0:
                    break
            time.sleep(1)
            after_rss = proc_status_kb(pp.pid, "VmRSS")
            res = {
                "requests": n, "hosts": hosts, "origin": origin_name, "base_rss_kb": base_rss,
                "parked_rss_kb": parked_rss, "waiting": waiting, "in_flight": in_flight,
                "bytes_per_parked": (parked_rss - base_rss) * 1024 / waiting if waiting else None,
                "after_rss_kb": after_rss, "waiting_after_close": released, "load_output": load_out.strip(),
            }
            self.results["parked"] = res
            if waiting + in_flight < n:
                self.fail("memory (parked)", "only %d waiting + %d in flight of %d sent; park_load says: %s"
                          % (waiting, in_flight, n, load_out.strip()))
            m = re.search(r"responses (\d+)", load_out)
            if m and int(m.group(1)):
                self.fail("memory (parked)", "%s parked requests were answered early: %s" % (m.group(1), load_out.strip()))
            log("parked: %d waiting + %d in flight, RSS %d -> %d KiB (%s B/parked request); after close %d waiting, "
                "RSS %d KiB" % (waiting, in_flight, base_rss, parked_rss, fmt(res["bytes_per_parked"], 0), released,
                                after_rss))
        finally:
            for p in (load, pp, origin):
                if p:
                    self.procs.stop(p)

    # ---- scenario 4: the gate -----------------------------------------------------------
    def scenario_gate(self):
        if not os.access(self.a.gate_bench, os.X_OK):
            self.fail("gate", "%s not found (build it: target gate_bench)" % self.a.gate_bench)
            return
        log("gate: %s" % self.a.gate_bench)
        p = subprocess.run([self.a.gate_bench], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300, preexec_fn=_child_setup(plan.PROXY_CPU))
        rows = []
        for line in p.stdout.splitlines():
            f = line.split()
            if len(f) >= 5 and f[1].isdigit() and f[2].isdigit() and f[3].isdigit():  # layer hosts used requests ns [/ 1k [range order]]
                rows.append({"layer": f[0], "hosts": int(f[1]), "used": int(f[2]), "requests": int(f[3]),
                             "ns": float(f[4]), "ratio": float(f[5]) if len(f) > 5 and f[5] != "-" else None,
                             "range": f[6] if len(f) > 6 and f[6] != "-" else None,
                             "order": f[7] if len(f) > 7 else "round-robin"})
        self.results["gate"] = {"output": p.stdout, "rows": rows, "rc": p.returncode}
        if p.returncode != 0 or not rows:
            self.fail("gate", "gate_bench exit %d: %s" % (p.returncode, p.stdout[-300:]))
