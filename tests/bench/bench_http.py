"""Reaching the targets: free loopback ports (the test harness's free_port: never the
same one twice in a run), plain HTTP GETs that never go through $http_proxy,
politeproxy's listening line, and its /metrics parsed into [(name, {label: value}, float)]."""
import os
import re
import sys
import urllib.request

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness_raw import free_port  # noqa: E402,F401

LISTEN_RE = re.compile(r"politeproxy: listening proxy=([0-9.]+):(\d+) admin=([0-9.]+):(\d+)")
METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via $http_proxy


def http_get(url, timeout=10.0):
    with _http.open(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def parse_metrics(text):
    """[(name, {label: value}, float)]"""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = METRIC_RE.match(line)
        if not m:
            continue
        labels = dict(LABEL_RE.findall(m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return out


def metric_sum(metrics, name):
    return sum(v for n, _, v in metrics if n == name)
