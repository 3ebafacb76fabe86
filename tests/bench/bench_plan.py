"""What the benchmark runs, and where: the paths of this directory (the Lua scripts,
the config templates) and of the repository, the targets of each scenario, the cells
they run, render(), which fills in a template of conf/, and cost_config(), the one politeproxy
config every cost benchmark starts from.

LOAD_CPU and PROXY_CPU are the cores of the load generators and origin, and of the
proxy under test. Read them as plan.LOAD_CPU at each use: run_bench.main moves both to
core 0 on a one-core machine."""
import os
import string

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
LUA = os.path.join(HERE, "lua")
CONF = os.path.join(HERE, "conf")
PROXIES = ["direct", "haproxy", "squid", "tinyproxy", "mitmproxy", "politeproxy"]
RUNNABLE = PROXIES + ["baseline"]  # baseline: only with --baseline
PASSTHROUGH_PROXIES = ["direct", "haproxy", "squid", "tinyproxy", "politeproxy", "baseline"]
# In the intercept scenario: direct = TLS straight to nginx, haproxy = HAProxy terminating
# TLS as a reverse proxy, squid = Squid ssl_bump, mitmproxy and politeproxy intercepting.
INTERCEPT_PROXIES = ["direct", "haproxy", "squid", "mitmproxy", "politeproxy", "baseline"]
TLS_ORIGIN_NAME = "origin.bench.test"  # every target resolves it to 127.0.0.1 (Squid's certificates name an IP
# literal in a DNS SAN, which no client accepts: a name keeps the comparison fair, and SNI in it)
# (requests per client connection (0: keep-alive), paced: at --intercept-rate req/s rather than as fast as answered)
INTERCEPT_CELLS = [(0, False), (10, False), (0, True), (10, True)]


def intercept_cell(per_connection, paced, rate):
    return "%s%s" % ("keep-alive" if per_connection == 0 else "new TLS conn / %d req" % per_connection,
                     ", %d req/s" % rate if paced else "")


SCENARIOS = ["gate", "passthrough", "intercept", "politeness", "memory"]
BODIES = [("1k", 1024), ("100k", 102400)]
CONNS = [1, 64, 256]
HEADLINE = ("1k", 64)  # the cell the goals are about: it runs for --duration
LOAD_CPU, PROXY_CPU = 0, 1


def render(template, **values):
    with open(os.path.join(CONF, template)) as f:
        return string.Template(f.read()).substitute(**values)


# The template every benchmark of politeproxy's cost renders (pass-through, h2_bench,
# dns_bench, kernel_ab, instructions_ab, parent_bench, host_scale_bench): limits wide
# open, no adaptation, one worker. test_bench_configs.py holds the other templates to the same settings.
COST_TEMPLATE = "politeproxy-passthrough.yaml.in"


def _merge(base, overrides):
    for key, value in overrides.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def cost_config(**overrides):
    """COST_TEMPLATE as YAML text with overrides merged in: a mapping merges key by key,
    None removes the key (cost_config(resolve=None, defaults={"upstream_protocol": "h2c"}))."""
    return yaml.safe_dump(_merge(yaml.safe_load(render(COST_TEMPLATE)), overrides), sort_keys=False)
