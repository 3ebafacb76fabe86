"""What the benchmark runs, and where: the paths of this directory (the Lua scripts,
the config templates) and of the repository, the targets of each scenario, the cells
they run, and render(), which fills in a template of conf/.

LOAD_CPU and PROXY_CPU are the cores of the load generators and origin, and of the
proxy under test. Read them as plan.LOAD_CPU at each use: run_bench.main moves both to
core 0 on a one-core machine."""
import os
import string

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
