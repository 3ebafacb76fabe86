"""Checks that a bound held: how many requests were at the origin at once
(overlap_peak, check_peak_across), and that a CONNECT tunnel holds a slot of its gate
(check_tunnel_holds_slot)."""
from harness_checks import check, wait_until
from harness_raw import connect_tunnel


def overlap_peak(records):
    """Max number of request records (start, end; end None = still open) overlapping."""
    ev = []
    for r in records:
        ev.append((r["start"], 1))
        ev.append((r["end"] if r["end"] is not None else float("inf"), -1))
    cur = peak = 0
    for _, d in sorted(ev, key=lambda e: (e[0], e[1])):
        cur += d
        peak = max(peak, cur)
    return peak


def check_peak_across(origin, hosts, count, bound, what):
    """The origin saw `count` requests for `hosts` together, and `bound` of them at once
    at the most (and at some moment)."""
    seen = [r for h in hosts for r in origin.host(h)["requests"]]
    check(len(seen) == count, "%s: the origin saw %d requests, sent %d" % (what, len(seen), count))
    check(overlap_peak(seen) == bound, "%s: %d requests at the origin at once, bound %d"
          % (what, overlap_peak(seen), bound))


def check_tunnel_holds_slot(proxy, host, port, gate_key):
    """A CONNECT to host:port holds one slot of the gate `gate_key` while it is open."""
    s = connect_tunnel(proxy, host, port)
    try:
        check(wait_until(lambda: proxy.hosts().get(gate_key, {}).get("in_flight") == 1, 3.0),
              "the tunnel to %s does not hold a slot of %s: %s" % (host, gate_key, proxy.hosts().get(gate_key)))
    finally:
        s.close()
