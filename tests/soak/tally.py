"""Outcome counting: Tally counts every request by outcome label and by scenario, the
failures and warnings with a few examples each, and the time spent per scenario run.
Shared by all client threads (one lock)."""

import collections
import threading
import time


class Tally:
    MAX_EXAMPLES = 12

    def __init__(self):
        self.lock = threading.Lock()
        self.t0 = time.monotonic()  # examples are stamped relative to this: the load start
        self.requests = 0
        self.by_label = collections.Counter()       # outcome label -> n
        self.by_scenario = collections.Counter()    # scenario -> n
        self.by_scn_label = collections.Counter()   # (scenario, label) -> n
        self.fails = collections.Counter()          # kind -> n
        self.fail_examples = collections.defaultdict(list)
        self.warns = collections.Counter()
        self.warn_examples = collections.defaultdict(list)
        self.scn_time = collections.Counter()       # scenario -> seconds spent
        self.scn_runs = collections.Counter()       # scenario -> runs
        self.counts = collections.Counter()         # other figures for the summary

    def ran(self, name, seconds):
        with self.lock:
            self.scn_time[name] += seconds
            self.scn_runs[name] += 1

    def record(self, scenario, label, fail=None, warn=None, detail=""):
        with self.lock:
            self.requests += 1
            self.by_label[label] += 1
            self.by_scenario[scenario] += 1
            self.by_scn_label[(scenario, label)] += 1
            if fail:
                self._note(self.fails, self.fail_examples, fail, scenario, label, detail)
            if warn:
                self._note(self.warns, self.warn_examples, warn, scenario, label, detail)

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] += n

    def note_fail(self, kind, detail):
        with self.lock:
            self._note(self.fails, self.fail_examples, kind, "-", "-", detail)

    def note_warn(self, kind, detail):
        with self.lock:
            self._note(self.warns, self.warn_examples, kind, "-", "-", detail)

    def _note(self, counter, examples, kind, scenario, label, detail):
        counter[kind] += 1
        if len(examples[kind]) < self.MAX_EXAMPLES:
            examples[kind].append("[t=%.1f] %s -> %s %s" % (
                time.monotonic() - self.t0, scenario, label, detail))

    def snapshot(self):
        with self.lock:
            return self.requests, collections.Counter(self.by_label)
