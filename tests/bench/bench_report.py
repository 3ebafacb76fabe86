"""The report of a run: the machine it ran on (and whether it was busy compiling), the
markdown summary of every scenario's table (medians of the good runs, ratios to
politeproxy), and the goals of issues 4 and 9 judged from the figures."""
import datetime
import os
import platform
import statistics
import subprocess

from bench_plan import BODIES, CONNS, INTERCEPT_CELLS, INTERCEPT_PROXIES, RUNNABLE, intercept_cell


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1, unit=""):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if abs(x) >= 100:
        return "%.0f%s" % (x, unit)
    return ("%." + str(digits) + "f%s") % (x, unit)


def ratio(x, ref):
    if x is None or ref in (None, 0):
        return "–"
    return "%.2f" % (x / ref)


def machine_info():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break

    def first_line(argv):
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
            return p.stdout.strip().splitlines()[0] if p.stdout.strip() else "?"
        except Exception:
            return "?"

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "versions": {
            "nginx": first_line(["nginx", "-v"]).replace("nginx version: ", ""),
            "haproxy": first_line(["haproxy", "-v"]).split(" - ")[0],
            "squid": first_line(["squid", "-v"]),
            "tinyproxy": first_line(["tinyproxy", "-v"]),
            "wrk": first_line(["wrk", "-v"]).split(" Copyright")[0],
        },
    }


def busy_processes():
    busy = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if comm in ("cc1plus", "cc1", "ld", "ld.gold", "ld.lld", "ninja", "make", "cmake", "rustc", "clang++"):
                busy.append("%s(%s)" % (comm, d))
    return busy


def medians(runs, good):
    """What every table row shows of a cell's runs: medians of the good ones, and how many failed."""
    return {"rps": median([r["rps"] for r in good]), "p50": median([r["p50_us"] / 1000 for r in good]),
            "p99": median([r["p99_us"] / 1000 for r in good]), "cpu": median([r.get("cpu_us_per_req") for r in good]),
            "failed": len(runs) - len(good), "runs": len(runs)}


def summarize(bench, info, args, elapsed):
    R = bench.results
    L = []
    L.append("## politeproxy benchmark (tests/bench/run_bench.py)")
    L.append("")
    L.append("- date: %s; run time %.1f min; command: `%s`" % (info["date"], elapsed / 60, info["command"]))
    L.append("- machine: %d cores, %s, %.0f GiB, Linux %s; load average at start %s%s" % (
        info["nproc"], info["cpu"], info["mem_gib"], info["kernel"], " ".join(info["loadavg_start"]),
        ("; **busy: %s**" % ", ".join(info["busy"])) if info["busy"] else ""))
    L.append("- politeproxy %s (commit %s); %s" % (info["politeproxy"], info["commit"],
                                                   "; ".join("%s" % v for v in info["versions"].values())))
    L.append("- method: nginx origin + wrk on core 0, the proxy under test alone on core 1 (one worker/thread); "
             "%d repeat(s), interleaved, medians; 1 KiB c64 runs %ds, the other cells %ds" % (
                 args.repeats, args.duration, args.sweep_duration))
    L.append("")

    pt = R["passthrough"]
    if pt:
        L.append("### 1. Pass-through (one host, limits wide open)")
        L.append("")
        L.append("Ratios are this row / politeproxy's in the same cell. CPU = proxy utime+stime per request; "
                 "RSS = the proxy's peak (VmHWM) during the cell.")
        L.append("")
        L.append("| body | conns | target | req/s | ×pp | p50 ms | p99 ms | p99 ×pp | CPU µs/req | ×pp | peak RSS MiB | ×pp |")
        L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for body, _ in BODIES:
            for conns in CONNS:
                agg = {}
                for name in RUNNABLE:
                    runs = pt.get("%s/%d/%s" % (body, conns, name))
                    if runs is None:
                        continue
                    good = [r for r in runs if not r.get("error")]
                    agg[name] = dict(medians(runs, good),
                                     rss=max([r.get("rss_peak_kb") or 0 for r in good], default=0) / 1024 or None)
                ref = agg.get("politeproxy", {})
                for name, g in agg.items():
                    label = name + (" (%d/%d runs failed)" % (g["failed"], g["runs"]) if g["failed"] else "")
                    if name == "politeproxy":
                        label = "**politeproxy**" + label[len("politeproxy"):]
                    L.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        body, conns, label, fmt(g["rps"], 0), ratio(g["rps"], ref.get("rps")),
                        fmt(g["p50"], 2), fmt(g["p99"], 2), ratio(g["p99"], ref.get("p99")),
                        fmt(g["cpu"], 1), ratio(g["cpu"], ref.get("cpu")),
                        fmt(g["rss"], 1), ratio(g["rss"], ref.get("rss"))))
                R.setdefault("passthrough_medians", {})["%s/%d" % (body, conns)] = agg
        L.append("")
        errs = {}
        for key, runs in pt.items():
            name = key.split("/")[2]
            for r in runs:
                for e in ("connect", "read", "write", "timeout"):
                    if r.get("err_" + e):
                        errs.setdefault(name, {}).setdefault(e, 0)
                        errs[name][e] += r["err_" + e]
        if errs:
            L.append("wrk socket errors over all runs (not failures: every response that arrived was checked): " + "; ".join(
                "%s %s" % (n, ", ".join("%s %d" % kv for kv in sorted(e.items()))) for n, e in sorted(errs.items())) +
                ("; tinyproxy closes each client connection after one response and wrk counts that as a read error"
                 if "tinyproxy" in errs else "") + ".")
            L.append("")

    ic = R["intercept"]
    if ic:
        L.append("### 1b. TLS interception (1 KiB, 64 client connections, TLS on both sides)")
        L.append("")
        L.append("tls_load (tests/bench/tls_load.cpp) sends CONNECT, completes TLS with the proxy (verifying the "
                 "certificate it mints) and sends keep-alive GETs; HAProxy and direct are TLS straight to them. "
                 "Latency (p50, p99) is a request's, from writing it to its response's last byte, as wrk measures; "
                 "set-up is a connection's, from the TCP connect to the end of the TLS handshake, the CONNECT included; "
                 "both without the first second of each run (64 handshakes at once, pools filling). Paced cells send "
                 "at a fixed rate and charge a late request from the moment it was due (as wrk2), also one due while its connection was being replaced. Runs: keep-alive "
                 "as fast as answered %d s, the other cells %d s. " % (args.duration, max(5, args.sweep_duration)) +
                 "Ratios are this row / politeproxy's in the same cell. Origin conns = TCP connections nginx accepted "
                 "per 1000 requests (the proxy's TLS pool reuse). Squid's CPU includes its certificate helpers.")
        L.append("")
        L.append("| client connections | target | req/s | ×pp | p50 ms | p99 ms | p99 ×pp | set-up p50 / p99 ms | CPU µs/req | ×pp "
                 "| origin conns / 1000 req |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for per_connection, paced in INTERCEPT_CELLS:
            label = intercept_cell(per_connection, paced, args.intercept_rate)
            agg = {}
            for name in INTERCEPT_PROXIES:
                runs = ic.get(label + "/" + name)
                if runs is None:
                    continue
                good = [r for r in runs if not r.get("error")]
                agg[name] = dict(
                    medians(runs, good),
                    setup_p50=median([r["setup_p50_us"] / 1000 for r in good if r.get("setup_p50_us")]),
                    setup_p99=median([r["setup_p99_us"] / 1000 for r in good if r.get("setup_p99_us")]),
                    origin_conns=median([1000.0 * r["origin_connections"] / r["requests"] for r in good
                                         if r.get("requests")]))
            ref = agg.get("politeproxy", {})
            labels = {"direct": "direct (TLS to nginx)", "haproxy": "HAProxy TLS termination",
                      "squid": "Squid ssl_bump", "mitmproxy": "mitmproxy"}
            for name, g in agg.items():
                shown = "**politeproxy**" if name == "politeproxy" else labels.get(name, name)
                if g["failed"]:
                    shown += " (%d/%d runs failed)" % (g["failed"], g["runs"])
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |" % (
                    label, shown, fmt(g["rps"], 0), ratio(g["rps"], ref.get("rps")), fmt(g["p50"], 2), fmt(g["p99"], 2),
                    ratio(g["p99"], ref.get("p99")), fmt(g["setup_p50"], 2), fmt(g["setup_p99"], 2),
                    fmt(g["cpu"], 1), ratio(g["cpu"], ref.get("cpu")),
                    fmt(g["origin_conns"], 2)))
            R.setdefault("intercept_medians", {})[label] = agg
        L.append("")
        runs = [r for key, rs in ic.items() if key.endswith("/politeproxy") for r in rs if "leaves_minted" in r]
        if runs:
            L.append("politeproxy's leaf certificates over these runs (tls_leaf_certificates_total): %d minted, %d "
                     "from the cache, for %d client TLS handshakes (the first connection to the name, in the warm-up run, minted its leaf)." % (
                         sum(r["leaves_minted"] for r in runs), sum(r["leaves_cached"] for r in runs),
                         sum(r.get("handshakes", 0) for r in runs)))
            L.append("")

    po = R["politeness"]
    if po:
        L.append("### 2. Politeness (%d hosts × concurrency 2, origin delay %.0f ms)" % (po["hosts"], po["delay_s"] * 1000))
        L.append("")
        L.append("| ideal req/s | achieved req/s (origin, steady %.0f s) | achieved / ideal | origin hold ms (ceiling req/s, achieved / ceiling) "
                 "| origin peak in flight per host "
                 "| hosts at peak | /metrics peak host_in_flight (%d samples) | min host_waiting (steady) | client p50 / p99 ms | wrk req/s | adaptive |"
                 % (po["duration_s"], po["metrics_samples"]))
        L.append("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|")
        w = po["wrk"]
        hold = po.get("origin_mean_hold_s")
        L.append("| %.0f | %s | %s | %s | **%d** | %s | %s | %s | %s / %s | %s | %s |" % (
            po["ideal_rps"], fmt(po["origin_rps"], 0),
            ("%.1f%%" % (100 * po["achieved_ratio"])) if po["achieved_ratio"] else "–",
            ("%.2f (%.0f, %.1f%%)" % (hold * 1000, po["origin_ceiling_rps"], 100 * po["origin_rps"] / po["origin_ceiling_rps"]))
            if hold else "–",
            po["origin_peak_per_host"], ", ".join("%s: %d hosts" % kv for kv in sorted(po["origin"]["peak_histogram"].items())),
            fmt(po["metrics_peak_in_flight"], 0), fmt(po["metrics_min_waiting_steady"], 0),
            fmt(w.get("p50_us", 0) / 1000, 1), fmt(w.get("p99_us", 0) / 1000, 1), fmt(w.get("rps"), 0),
            "on (hard_max 2)" if po["adaptive"] else "off"))
        L.append("")
        L.append("Load: wrk, %d connections rotating over the %d host names (so ~%d requests per host outstanding: "
                 "2 in flight, the rest parked). Origin: slow_origin.py (asyncio), which counts in-flight requests "
                 "per Host exactly. Hold = the origin's mean time from reading a request to writing its response (the delay plus "
                 "its own lateness under this load): hosts × 2 / hold is the most any proxy could get through." % (
                     po["connections"], po["hosts"], po["connections"] // po["hosts"]))
        L.append("")

    me, pk = R["memory"], R["parked"]
    if me or pk:
        L.append("### 3. Memory (politeproxy)")
        L.append("")
        L.append("| measurement | before | loaded | per unit | after release | returned |")
        L.append("|---|---:|---:|---:|---:|---:|")
        if me:
            L.append("| %d distinct hosts, each used once (%.0f req/s, %.0f s) | %.1f MiB, %d hosts | %.1f MiB, %d hosts "
                     "(peak %.1f MiB; %.1f MiB after one /metrics scrape) | **%s B per tracked host** | %.1f MiB, %d hosts (%.0f s after host_idle_ttl 5s) | %s |" % (
                         me["hosts"], me["load_rps"] or 0, me["load_seconds"], me["base_rss_kb"] / 1024, me["base_tracked"],
                         me["loaded_rss_kb"] / 1024, me["loaded_tracked"], me["loaded_hwm_kb"] / 1024, me["rss_after_one_scrape_kb"] / 1024,
                         fmt(me["bytes_per_host"], 0), me["after_rss_kb"] / 1024, me["after_tracked"], me["evict_seconds"],
                         ("%d%% of the growth" % round(100 * me["returned_ratio"])) if me["returned_ratio"] is not None else "–"))
        if pk:
            L.append("| %d requests parked over %d hosts (concurrency 1; origin %s) | %.1f MiB | %.1f MiB, %d waiting + %d in flight "
                     "| **%s B per parked request** | %.1f MiB, %d waiting (clients closed) | %s |" % (
                         pk["requests"], pk["hosts"], pk["origin"], pk["base_rss_kb"] / 1024, pk["parked_rss_kb"] / 1024,
                         pk["waiting"], pk["in_flight"], fmt(pk["bytes_per_parked"], 0), pk["after_rss_kb"] / 1024,
                         pk["waiting_after_close"],
                         ("%d%% of the growth" % round(100 * (pk["parked_rss_kb"] - pk["after_rss_kb"]) /
                                                       (pk["parked_rss_kb"] - pk["base_rss_kb"])))
                         if pk["parked_rss_kb"] > pk["base_rss_kb"] else "–"))
        L.append("")
        L.append("RSS is VmRSS of the proxy process; per unit = ΔRSS / Δhosts_tracked, and ΔRSS / requests waiting "
                 "(the parked figure includes each request's client connection and session).")
        L.append("")

    ga = R["gate"]
    if ga and ga["rows"]:
        L.append("### 4. The gate alone (build/gate_bench, sans-io, core 1)")
        L.append("")
        L.append("| layer | order | hosts held | hosts used | requests | ns per acquire+release (median) "
                 "| vs 1k hosts (median) | lowest-highest round |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for r in ga["rows"]:
            order = r.get("order", "round-robin")
            vs_1k = gate_ratio(ga["rows"], r["layer"], r["hosts"], r.get("used", r["hosts"]), order)
            L.append("| %s | %s | %d | %d | %d | %.1f | %s | %s |" % (
                r["layer"], order, r["hosts"], r.get("used", r["hosts"]), r["requests"], r["ns"],
                "%.2fx" % vs_1k if vs_1k and r["hosts"] >= 1000 else "–", r.get("range") or "–"))
        L.append("")

    goals = evaluate_goals(R, args.intercept_rate)
    if goals:
        L.append("### Goals (issues 4, 9 and 31), from this run")
        L.append("")
        L.append("| goal | measured | met |")
        L.append("|---|---|---|")
        for g, m, ok in goals:
            L.append("| %s | %s | %s |" % (g, m, "yes" if ok else ("**no**" if ok is False else "–")))
        L.append("")
    if bench.failures:
        L.append("### Failures")
        L.append("")
        for f in bench.failures:
            L.append("- " + f.replace("\n", " ")[:400])
        L.append("")
    return "\n".join(L)


def gate_row(rows, layer, hosts, used, order="round-robin"):
    """gate_bench's row for that layer, hosts held and used, and order (None: not run)."""
    return next((r for r in rows if r["layer"] == layer and r["hosts"] == hosts and r.get("used", hosts) == used
                 and r.get("order", "round-robin") == order), None)


def gate_ratio(rows, layer, hosts, used, order="round-robin"):
    """That row's cost over the 1k row's of its order: gate_bench's own (the median of its
    interleaved rounds' ratios), or, from a gate_bench without rounds, its ns over the 1k row's."""
    r, base = gate_row(rows, layer, hosts, used, order), gate_row(rows, layer, 1000, 1000, order)
    if r is None or base is None:
        return None
    return r.get("ratio") or r["ns"] / base["ns"]


def evaluate_goals(R, rate):
    goals = []
    med = R.get("passthrough_medians", {}).get("1k/64", {})
    pp, ha, sq = med.get("politeproxy"), med.get("haproxy"), med.get("squid")

    def both(x, y):
        return x is not None and y is not None

    if pp and ha:
        if both(pp["rps"], ha["rps"]):
            goals.append(("1 KiB c64: req/s >= HAProxy", "%.0f vs %.0f (%.2fx)" % (pp["rps"], ha["rps"], pp["rps"] / ha["rps"]),
                          pp["rps"] >= ha["rps"]))
        if both(pp["cpu"], ha["cpu"]):
            goals.append(("1 KiB c64: CPU/request <= HAProxy", "%.1f vs %.1f µs (%.2fx)" % (pp["cpu"], ha["cpu"], pp["cpu"] / ha["cpu"]),
                          pp["cpu"] <= ha["cpu"]))
            goals.append(("1 KiB c64: CPU/request <= 0.8x HAProxy (issue 31)", "%.2fx" % (pp["cpu"] / ha["cpu"]),
                          pp["cpu"] <= 0.8 * ha["cpu"]))
        if both(pp["p99"], ha["p99"]):
            goals.append(("1 KiB c64: p99 <= 1.2x HAProxy", "%.2f vs %.2f ms (%.2fx)" % (pp["p99"], ha["p99"], pp["p99"] / ha["p99"]),
                          pp["p99"] <= 1.2 * ha["p99"]))
    if pp and sq:
        if both(pp["rps"], sq["rps"]):
            goals.append(("1 KiB c64: req/s >= 1.5x Squid", "%.2fx" % (pp["rps"] / sq["rps"]), pp["rps"] >= 1.5 * sq["rps"]))
        if both(pp["cpu"], sq["cpu"]):
            goals.append(("1 KiB c64: CPU/request <= Squid / 1.5", "Squid uses %.2fx politeproxy's" % (sq["cpu"] / pp["cpu"]),
                          sq["cpu"] >= 1.5 * pp["cpu"]))
    im = R.get("intercept_medians", {})
    keep = im.get(intercept_cell(*INTERCEPT_CELLS[0], rate), {})
    ipp, isq, iha = keep.get("politeproxy"), keep.get("squid"), keep.get("haproxy")
    if ipp and isq and both(ipp["cpu"], isq["cpu"]):
        goals.append(("intercept keep-alive: CPU/request <= 0.5x Squid ssl_bump", "%.1f vs %.1f µs (%.2fx)" % (
            ipp["cpu"], isq["cpu"], ipp["cpu"] / isq["cpu"]), ipp["cpu"] <= 0.5 * isq["cpu"]))
    if ipp and iha and both(ipp["cpu"], iha["cpu"]):
        goals.append(("intercept keep-alive: CPU/request <= 1.2x HAProxy TLS termination", "%.1f vs %.1f µs (%.2fx)" % (
            ipp["cpu"], iha["cpu"], ipp["cpu"] / iha["cpu"]), ipp["cpu"] <= 1.2 * iha["cpu"]))
    def p99_ratio(paced, name):
        k = im.get(intercept_cell(0, paced, rate), {}).get(name)
        f = im.get(intercept_cell(INTERCEPT_CELLS[1][0], paced, rate), {}).get(name)
        return (k["p99"], f["p99"]) if k and f and k["p99"] and f["p99"] else None

    for paced in (True, False):  # the goal at a rate every TLS target sustains; at saturation for the record
        pp_p99, ha_p99 = p99_ratio(paced, "politeproxy"), p99_ratio(paced, "haproxy")
        if pp_p99:
            goals.append(("intercept, %s: p99 with a new TLS connection every %d requests <= 2x keep-alive p99" % (
                "%d req/s" % rate if paced else "as fast as answered", INTERCEPT_CELLS[1][0]),
                "%.2f vs %.2f ms (%.2fx)%s" % (pp_p99[1], pp_p99[0], pp_p99[1] / pp_p99[0],
                                             "; HAProxy TLS %.2fx" % (ha_p99[1] / ha_p99[0]) if ha_p99 else ""),
                pp_p99[1] <= 2 * pp_p99[0]))
    po = R.get("politeness")
    if po:
        if po["achieved_ratio"] is not None:
            goals.append(("politeness: >= 95% of ideal", "%.1f%%" % (100 * po["achieved_ratio"]), po["achieved_ratio"] >= 0.95))
        goals.append(("politeness: origin peak per host <= 2", "%d" % po["origin_peak_per_host"], po["origin_peak_per_host"] <= 2))
    me = R.get("memory")
    if me and me["bytes_per_host"] is not None:
        goals.append(("<= 1 KiB per tracked idle host", "%.0f B" % me["bytes_per_host"], me["bytes_per_host"] <= 1024))
        goals.append(("memory returns after idle eviction", "hosts_tracked %d -> %d, RSS %.1f -> %.1f MiB (%s of growth returned)" % (
            me["loaded_tracked"], me["after_tracked"], me["loaded_rss_kb"] / 1024, me["after_rss_kb"] / 1024,
            ("%d%%" % round(100 * me["returned_ratio"])) if me["returned_ratio"] is not None else "–"),
            me["after_tracked"] == 0 and (me["returned_ratio"] or 0) >= 0.5))
    pk = R.get("parked")
    if pk and pk["bytes_per_parked"] is not None:
        goals.append(("<= 16 KiB per parked request", "%.0f B" % pk["bytes_per_parked"], pk["bytes_per_parked"] <= 16384))
    ga = R.get("gate")
    if ga and ga["rows"]:
        worst = max((r for r in ga["rows"] if r["hosts"] == 100000 and r.get("order", "round-robin") == "round-robin"),
                    key=lambda r: r["ns"], default=None)  # issue 4's reading
        if worst:
            goals.append(("gate < 1 µs per acquire+release at 100k hosts", "%.0f ns (%s layer, the slower one)" % (
                worst["ns"], worst["layer"]), worst["ns"] < 1000))
        # Issue 31: admission with a million hosts held, within 1.5x of its cost at 1k, in
        # every reading: requests over 1k of the million (a working set among idle hosts),
        # and over all of them (each host's state cold in the cache); in the order the
        # hosts were made, and shuffled.
        for used, order, reading in ((1000, "round-robin", "1k used of 1M held, round robin"),
                                     (1000, "shuffled", "1k used of 1M held, shuffled"),
                                     (1000000, "round-robin", "all of 1M, round robin"),
                                     (1000000, "shuffled", "all of 1M, shuffled")):
            base = gate_row(ga["rows"], "host_gates", 1000, 1000, order)
            at_1m = gate_row(ga["rows"], "host_gates", 1000000, used, order)
            if base and at_1m:
                vs_1k = gate_ratio(ga["rows"], "host_gates", 1000000, used, order)
                goals.append(("host_gates at 1M hosts <= 1.5x 1k (%s)" % reading, "%.0f vs %.0f ns (%.2fx%s)" % (
                    at_1m["ns"], base["ns"], vs_1k, ", rounds %s" % at_1m["range"] if at_1m.get("range") else ""),
                    vs_1k <= 1.5))
    return goals
