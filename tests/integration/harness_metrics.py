"""Reading /metrics: parse_metrics() turns the Prometheus text format into
{(name, ((label, value), ...sorted)): float}; mget, msum and mseries pick series out."""
import re

from harness_checks import TestFailure, wait_until


_METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse_metrics(text):
    """Prometheus text format -> {(name, ((label, value), ...sorted)): float}."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _METRIC_RE.match(line)
        if not m:
            raise TestFailure("unparseable /metrics line: %r" % line)
        name, labels_s, value = m.groups()
        labels = {}
        if labels_s:
            pos = 0
            while pos < len(labels_s):
                lm = _LABEL_RE.match(labels_s, pos)
                if not lm or lm.end() == pos:
                    raise TestFailure("unparseable labels in /metrics line: %r" % line)
                labels[lm.group(1)] = _unescape(lm.group(2))
                pos = lm.end()
        v = {"+Inf": float("inf"), "-Inf": float("-inf"), "NaN": float("nan")}.get(value)
        out[(name, tuple(sorted(labels.items())))] = float(value) if v is None else v
    return out


def mget(metrics, name, default=None, **labels):
    """Value of the series with exactly these labels, or default."""
    return metrics.get((name, tuple(sorted(labels.items()))), default)


def msum(metrics, name, **labels):
    """Sum over the series of `name` whose labels include `labels`."""
    total = 0.0
    for (n, ls), v in metrics.items():
        if n == name and all(dict(ls).get(k) == val for k, val in labels.items()):
            total += v
    return total


def mseries(metrics, name):
    return {ls: v for (n, ls), v in metrics.items() if n == name}


def metrics_when(proxy, name, want, timeout=5, **labels):
    """Scrape until the sum of `name` over series with `labels` is `want`; return the last
    scrape. The proxy counts a request when its exchange ends, just after its last byte is
    written, so a client can hold its whole answer a moment before the counter moves."""
    last = {}

    def reached():
        nonlocal last
        last = proxy.metrics()
        return msum(last, name, **labels) == want

    wait_until(reached, timeout)
    return last
