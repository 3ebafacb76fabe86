"""Integration-test harness for politeproxy: the one module a test imports.

- locate the binary (--proxy PATH, or env POLITEPROXY_BIN)
- start/stop the proxy with a temporary YAML config built from a dict, parse its
  "politeproxy: listening proxy=... admin=..." line, keep draining its stderr
- fetch and parse /metrics into {(name, ((label, value), ...)): float}
- send requests through the proxy (http.client with absolute-form targets, or raw
  sockets), N at once from threads
- a hard per-test timeout and cleanup of every process started, by PID, even on failure

A test file looks like:

    import harness as H
    def test(t):                     # t is a harness.TestContext
        origin = t.origin()
        proxy = t.proxy(H.base_config(hosts={...}))
        ...
        H.check(cond, "message")     # or a plain assert with a message
    if __name__ == "__main__":
        H.main(test, timeout=40)

The names live in one module per concept, all re-exported here:
  harness_checks    TestFailure, check, log, wait_until, SLOW
  harness_config    base_config, dump_config
  harness_proxy     Proxy (the process under test), _pdeathsig, the live-PID registry
  harness_metrics   parse_metrics, mget, msum, mseries
  harness_requests  request, concurrent, Background, Result, https_session, brief, summarize
  harness_raw       RawClient, RawServer, recv_until, recv_head, recv_to_close, raw_get,
                    connect_tunnel, free_port
  harness_bounds    overlap_peak, check_peak_across, check_tunnel_holds_slot
  harness_tools     promtool_check, chromium
  harness_runner    TestContext (t.redis(), t.redis_cluster(), t.redis_sentinel(), t.store_kind),
                    find_binary, main (--store single|cluster|sentinel)
and origin.py's Origin and make_cert.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from origin import Origin, make_cert  # noqa: E402,F401
from harness_checks import SLOW, TestFailure, _T0, check, log, wait_until  # noqa: E402,F401
from harness_config import base_config, dump_config  # noqa: E402,F401
from harness_proxy import (  # noqa: E402,F401
    LISTEN_RE, STARTUP_TIMEOUT, STOP_GRACE, Proxy, _kill_all_live, _live, _live_lock,
    _pdeathsig, _register_pid, _unregister_pid)
from harness_metrics import (  # noqa: E402,F401
    _LABEL_RE, _METRIC_RE, _unescape, metrics_when, mget, mseries, msum, parse_metrics)
from harness_requests import (  # noqa: E402,F401
    Background, Result, brief, concurrent, https_session, request, summarize)
from harness_raw import (  # noqa: E402,F401
    RawClient, RawResponse, RawServer, connect_tunnel, connect_tunnel_raw, free_port, raw_get, recv_head,
    recv_to_close, recv_until)
from harness_bounds import check_peak_across, check_tunnel_holds_slot, overlap_peak  # noqa: E402,F401
from harness_tools import chromium, promtool_check  # noqa: E402,F401
from harness_runner import TestContext, find_binary, main  # noqa: E402,F401
