#!/usr/bin/python3
"""Fleet on a Redis Cluster (redis+cluster://, 3 masters): one bound per host across
processes, whichever node holds the host's keys (pp:{HOSTKEY}:...), through the loss of
a node and the move of a slot.

1. Spread: 200 hosts (h0..h199.fleet.test), whose keys fall on all three masters; each
   gets 2 requests through each of 2 proxies at once (concurrency 2, expected_workers 2,
   0.5 s at the origin): every one answered 200 and the origin's peak for every host is
   exactly 2, the fleet bound (not 2 x 2).
2. A node lost: steady load on 30 hosts (10 per master, 4 requests outstanding each);
   one master is SIGKILLed mid-run. Every request is answered (200, or 503 with
   Retry-After: counted), no host goes above 2 at the origin (hosts of the lost node
   fall back to the local share 2/2 = 1 per process), /hosts of both proxies shows
   "fleet_store_up": false for the lost node's hosts only (the others stay true), and
   the fleet_store_up gauge is 0 (not every node reachable).
3. The node comes back (empty, same nodes.conf): the gauge returns to 1 and the hosts to
   true. Then the slot of a busy host moves to another master by hand (IMPORTING /
   MIGRATING, its keys one by one 0.2 s apart, the slot held open 1 s more: MOVED, ASK
   and TRYAGAIN for the proxies) under load: every request answered, the host's peak
   at the origin exactly 2."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import redis_cluster  # noqa: E402
from fleet_common import Streams, check_answered, fleet_config, store_up, tagged_peak  # noqa: E402

BOUND = 2
HOSTS = ["h%d.fleet.test" % i for i in range(200)]
BATCH = 40            # phase 1: hosts loaded at once (4 requests each: 160 client threads)
DELAY = 0.5           # phase 1: seconds at the origin
PER_NODE = 10         # phase 2: hosts per master under steady load
VICTIM = 1            # phase 2: the master that is killed


def lease_key(host_key):
    return "pp:{%s}:leases" % host_key


def owners(cluster, keys):
    """{host: index of the master that holds its keys}."""
    return {h: cluster.owner_index(cluster.slot_of(lease_key(k))) for h, k in keys.items()}


def host_keys(proxy, hosts):
    """{host: its key in /hosts}: the lower-case name (with :port if the proxy adds one)."""
    shown = proxy.hosts()
    out = {}
    for h in hosts:
        match = [k for k in shown if k == h or k.startswith(h + ":")]
        H.check(match, "%s: /hosts has no entry for %s (keys like %s)" % (proxy.name, h, sorted(shown)[:3]))
        out[h] = match[0]
    return out


def spread(t, cluster, origin, proxies):
    by_node = {}
    for h, n in owners(cluster, {h: h for h in HOSTS}).items():
        by_node.setdefault(n, []).append(h)
    H.log("phase 1: hosts per master %s" % {cluster.nodes[n]: len(v) for n, v in sorted(by_node.items())})
    H.check(len(by_node) == 3 and min(len(v) for v in by_node.values()) >= 30,
            "the 200 hosts' keys do not spread over the 3 masters: %s" % {n: len(v) for n, v in by_node.items()})
    for b in range(0, len(HOSTS), BATCH):
        hosts = HOSTS[b:b + BATCH]
        out = [None] * len(proxies)

        def one(i, p):
            out[i] = H.concurrent(p, ["http://%s:%d/x?delay=%s&tag=phase1&p=%s&k=%d" % (h, origin.port, DELAY, p.name, k)
                                      for h in hosts for k in range(2)], timeout=60)

        threads = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(proxies)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(90)
        bad = [r for res in out for r in (res or []) if r.error or r.status != 200]
        H.check(all(out) and not bad, "phase 1, hosts %d..%d: %d requests not answered 200: %s"
                % (b, b + len(hosts) - 1, len(bad), bad[:3]))
    peaks = {h: tagged_peak(origin, h, "phase1") for h in HOSTS}
    H.log("phase 1: origin peaks per host %s" % {v: sum(1 for p in peaks.values() if p == v) for v in set(peaks.values())})
    above = {h: p for h, p in peaks.items() if p > BOUND}
    H.check(not above, "phase 1: hosts above the fleet bound %d at the origin: %s" % (BOUND, above))
    below = {h: p for h, p in peaks.items() if p < BOUND}
    H.check(not below, "phase 1: hosts that had 4 requests at once but never %d at the origin: %s"
            % (BOUND, dict(list(below.items())[:10])))
    keys = host_keys(proxies[0], HOSTS)
    actual = owners(cluster, keys)
    H.check(len(set(actual.values())) == 3, "the hosts' keys (as /hosts names them) are not on all 3 masters")
    return keys, actual


def hosts_up(proxies, keys):
    """{(proxy name, host): the fleet_store_up field of its /hosts entry}."""
    out = {}
    for p in proxies:
        shown = p.hosts()
        for h, k in keys.items():
            out[(p.name, h)] = (shown.get(k) or {}).get("fleet_store_up", "absent")
    return out


def node_lost(t, cluster, origin, proxies, keys, where):
    lost = [h for h in HOSTS if where[h] == VICTIM][:PER_NODE]
    kept = [h for n in range(3) if n != VICTIM for h in [h for h in HOSTS if where[h] == n][:PER_NODE]]
    hosts = lost + kept
    load = Streams(origin, [(p, h) for p in proxies for h in hosts], per=2, delay=0.5, tag="phase2", duration=12)
    time.sleep(2.0)
    cluster.kill_node(VICTIM)
    killed = time.monotonic()
    H.log("phase 2: master %d (port %d) killed under load on %d hosts"
          % (VICTIM, cluster.nodes[VICTIM], len(hosts)))
    wanted = {(p.name, h): h in kept for p in proxies for h in hosts}
    flipped = []  # a kept host ever shown false

    def settled():
        seen = hosts_up(proxies, {h: keys[h] for h in hosts})
        flipped.extend(k for k in seen if wanted[k] and seen[k] is not True)
        return seen if all(seen[k] is wanted[k] for k in wanted) else None

    seen = H.wait_until(settled, timeout=6, interval=0.1)
    H.log("phase 2: /hosts settled %.2f s after the kill" % (time.monotonic() - killed) if seen else
          "phase 2: /hosts did not settle")
    gauges = [store_up(p) for p in proxies]
    time.sleep(max(0.0, killed + 3.0 - time.monotonic()))  # 3 s of load without the node at least
    results = load.stop()
    counts = check_answered(results, "phase 2 (a master lost)")
    H.check(seen, "phase 2: /hosts fleet_store_up per host, wanted false for the lost master's hosts and true "
            "for the others: %s" % {k: v for k, v in hosts_up(proxies, {h: keys[h] for h in hosts}).items()
                                    if v is not wanted[k]})
    H.check(not flipped, "phase 2: hosts on live masters shown without their store: %s" % sorted(set(flipped))[:5])
    H.check(gauges == [0, 0], "phase 2: fleet_store_up %s with a master down, expected 0 on both" % gauges)
    peaks = {h: tagged_peak(origin, h, "phase2") for h in hosts}
    H.log("phase 2: origin peaks: lost master's hosts %s, others %s (answers %s)"
          % ([peaks[h] for h in lost], [peaks[h] for h in kept], counts))
    H.check(all(v <= BOUND for v in peaks.values()), "phase 2: hosts above the bound %d at the origin: %s"
            % (BOUND, {h: v for h, v in peaks.items() if v > BOUND}))
    return lost, kept


def rejoin(t, cluster, origin, proxies, keys, hosts):
    cluster.start_node(VICTIM)
    back = time.monotonic()
    H.check(H.wait_until(lambda: all(store_up(p) == 1 for p in proxies), timeout=10),
            "fleet_store_up not back to 1 within 10 s of the master's return: %s" % [store_up(p) for p in proxies])
    H.log("phase 3: fleet_store_up 1 on both %.2f s after the master came back" % (time.monotonic() - back))
    for p in proxies:
        res = H.concurrent(p, ["http://%s:%d/x?tag=rejoin&" % (h, origin.port) for h in hosts], timeout=30)
        H.check(all(r.status == 200 for r in res), "after the rejoin: %s" % H.summarize(res))
    seen = H.wait_until(lambda: all(v is True for v in hosts_up(proxies, {h: keys[h] for h in hosts}).values()),
                        timeout=5, interval=0.1)
    H.check(seen, "after the rejoin, hosts still without their store: %s"
            % {k: v for k, v in hosts_up(proxies, {h: keys[h] for h in hosts}).items() if v is not True})


def migration(t, cluster, origin, proxies, keys, where, others):
    src, dst = [n for n in range(3) if n != VICTIM]
    busy = [h for h in HOSTS if where[h] == src][0]
    slot = cluster.slot_of(lease_key(keys[busy]))
    load = Streams(origin, [(p, busy) for p in proxies], per=3, delay=0.2, tag="phase3", duration=15)
    side = Streams(origin, [(p, h) for p in proxies for h in others], per=1, delay=0.2, tag="phase3", duration=15)
    time.sleep(1.0)
    moved = {}
    mover = threading.Thread(target=lambda: moved.update(cluster.migrate_slot(slot, dst, pause_between_keys=0.2,
                                                                               hold_open=1.0)), daemon=True)
    mover.start()
    gauges = []
    while mover.is_alive():
        gauges.append(min(store_up(p) or 0 for p in proxies))
        mover.join(0.1)
    time.sleep(1.5)
    results = load.stop() + side.stop()
    H.check(moved, "the migration of slot %d did not finish" % slot)
    H.log("phase 3: slot %d of %s moved %d -> %d: %d keys, open %.2f s; fleet_store_up (min of both) while open: %s"
          % (slot, busy, moved["src"], moved["dst"], moved["keys"], moved["closed"] - moved["opened"],
             sorted(set(gauges))))
    H.check(cluster.owner_port(slot) == cluster.nodes[dst], "slot %d is not on master %d after the move" % (slot, dst))
    H.check(moved["keys"] >= 1, "slot %d held none of %s's keys under load: nothing moved" % (slot, busy))
    # The proxies followed ASK (ASKING goes only before a command sent where ASK said).
    asking = cluster.node_client(dst).info("commandstats").get("cmdstat_asking", {}).get("calls", 0)
    H.log("phase 3: ASKING received by the destination: %d" % asking)
    H.check(asking >= 1, "no ASK was followed while slot %d was open" % slot)
    check_answered(results, "phase 3 (a slot moving)")
    peak = tagged_peak(origin, busy, "phase3")
    H.log("phase 3: %s's origin peak %d while its slot moved" % (busy, peak))
    H.check(peak == BOUND, "phase 3: %s reached %d at the origin while its slot moved, expected exactly %d"
            % (busy, peak, BOUND))
    side_peaks = {h: tagged_peak(origin, h, "phase3") for h in others}
    H.check(all(v <= BOUND for v in side_peaks.values()), "phase 3: other hosts above the bound: %s" % side_peaks)


def test(t):
    if not redis_cluster.available():
        print("SKIP: no redis-server or redis-cli")
        return
    cluster = t.redis_cluster(masters=3)
    origin = t.origin()
    cfg = fleet_config(cluster, concurrency=BOUND, lease_ttl="3s", timeout="300ms", expected_workers=2)
    proxies = [t.proxy(cfg, name="A"), t.proxy(cfg, name="B")]
    keys, where = spread(t, cluster, origin, proxies)
    lost, kept = node_lost(t, cluster, origin, proxies, keys, where)
    rejoin(t, cluster, origin, proxies, keys, lost + kept)
    # beside the busy host: a few hosts of the slot's destination, under load too
    dst = [n for n in range(3) if n != VICTIM][1]
    migration(t, cluster, origin, proxies, keys, where, [h for h in kept if where[h] == dst][:3])


if __name__ == "__main__":
    H.main(test, timeout=100)
