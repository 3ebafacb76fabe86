"""Configuration reloads while the load runs: Reloader rewrites the proxy's config file
(every fourth one invalid), sends SIGHUP, and checks that the reload counter moved by
exactly one in the right label and that /hosts shows the last valid file's limit."""

import os
import signal
import time

import harness as H
from proxy_admin import hosts_json, reload_counts
from soak_config import VALID_VARIANTS, invalid_config_text, make_config


class Reloader:
    def __init__(self, proxy, echo_port, fails):
        self.proxy, self.echo_port = proxy, echo_port
        self.fails = fails       # (check, message) of the run: a wrong reload goes here
        self.n = 0               # reloads sent
        self.valid = 0           # valid files sent
        self.invalid = 0         # invalid files sent
        self.conc = 2            # defaults.concurrency of the last valid file
        self.override5 = False   # does the last valid file lower h05.test to 1?

    def reload(self):
        proxy = self.proxy
        n = self.n
        self.n += 1
        before = reload_counts(proxy.metrics())
        t0 = time.monotonic()
        invalid = n % 4 == 1
        if invalid:
            text, why = invalid_config_text(self.echo_port, self.invalid)
            self.invalid += 1
            desc = "invalid (%s)" % why
        else:
            var = VALID_VARIANTS[self.valid % len(VALID_VARIANTS)]
            self.valid += 1
            cfg = make_config(self.echo_port, **var)
            text = H.dump_config(cfg)
            desc = "valid (concurrency %d, rate %g%s)" % (
                var["concurrency"], var["rate"],
                ", overrides " + ",".join(var["overrides"]) if var.get("overrides") else "")
        tmp = proxy.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, proxy.config_path)
        os.kill(proxy.pid, signal.SIGHUP)
        want = (before[0] + (0 if invalid else 1), before[1] + (1 if invalid else 0))
        got = H.wait_until(lambda: reload_counts(proxy.metrics()) == want, 5.0, interval=0.1)
        now = reload_counts(proxy.metrics())
        took = time.monotonic() - t0
        ok = bool(got) and proxy.alive()
        note = ""
        if ok and not invalid:
            self.conc = var["concurrency"]
            self.override5 = "h05.test" in (var.get("overrides") or {})
        # the configured limit /hosts shows must be the one of the last valid file
        try:
            hs = {h["key"]: h for h in hosts_json(proxy)}
            e = hs.get("h00.test")
            if e is not None and e.get("configured_limit") != self.conc:
                ok = False
                note = "; /hosts h00.test configured_limit %s, expected %d" % (
                    e.get("configured_limit"), self.conc)
            e5 = hs.get("h05.test")
            if e5 is not None and self.override5 and e5.get("configured_limit") != 1:
                ok = False
                note += "; /hosts h05.test configured_limit %s, expected 1 (override)" % (
                    e5.get("configured_limit"))
        except Exception as ex:  # noqa: BLE001
            ok = False
            note = "; /hosts failed: %s" % ex
        H.log("reload #%d %s: %s in %.2fs, counters success=%d failure=%d%s"
              % (n + 1, desc, "ok" if ok else "WRONG", took, now[0], now[1], note))
        if not ok:
            self.fails.append(("reload #%d" % (n + 1), "%s: expected counters %s, saw %s%s%s"
                               % (desc, want, now, note,
                                  "" if proxy.alive() else "; the proxy died")))
