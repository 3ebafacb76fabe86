"""What the soak reads from the proxy's admin listener: /hosts, the reload counters,
whether the proxy is idle again (settle_state: /hosts, the per-host gauges and its
descriptor count), and the end-of-run figures for the summary (end_state)."""

import collections
import json

import harness as H
from sampling import fd_count
from soak_config import HEALTHY, HOSTS


def hosts_json(proxy):
    status, _, body = proxy.admin_get("/hosts")
    H.check(status == 200, "GET /hosts answered %d" % status)
    return json.loads(body.decode())


def reload_counts(m):
    return (H.mget(m, "politeproxy_config_reloads_total", 0.0, result="success"),
            H.mget(m, "politeproxy_config_reloads_total", 0.0, result="failure"))


def settle_state(proxy):
    out = {"busy_hosts": [], "busy_gauges": [], "n_hosts": 0}
    out["fds"] = fd_count(proxy.pid)   # before our own admin connection opens
    hs = hosts_json(proxy)
    out["n_hosts"] = len(hs)
    for h in hs:
        if h.get("in_flight") or h.get("waiting"):
            out["busy_hosts"].append("%s in_flight=%s waiting=%s" % (
                h.get("key"), h.get("in_flight"), h.get("waiting")))
    m = proxy.metrics()
    for name in ("politeproxy_host_in_flight", "politeproxy_host_waiting"):
        for labels, v in H.mseries(m, name).items():
            if v != 0:
                out["busy_gauges"].append("%s%s=%g" % (name[12:], dict(labels), v))
    out["quiet"] = not out["busy_hosts"] and not out["busy_gauges"]
    return out


def end_state(proxy, info):
    """Fills info with the hosts' limits and rates, the limit changes (healthy hosts vs
    the others) and the proxy's requests_total by outcome."""
    try:
        info["hosts_end"] = [h for h in hosts_json(proxy) if h.get("key") in HOSTS]
        m = proxy.metrics()
        lc = collections.Counter()
        for labels, v in H.mseries(m, "politeproxy_limit_changes_total").items():
            d = dict(labels)
            grp = "healthy" if d.get("host") in HEALTHY else "others"
            lc[(grp, d.get("direction"))] += v
        info["limit_changes"] = lc
        info["outcomes"] = collections.Counter()
        for labels, v in H.mseries(m, "politeproxy_requests_total").items():
            info["outcomes"][dict(labels).get("outcome")] += v
    except Exception:  # noqa: BLE001
        pass
