"""The fleet benchmark's Redis stores: one redis-server (redis://) or a Redis Cluster of
three masters (redis+cluster://), each node started by PID on the load core with no
persistence, listening on 127.0.0.1 only; and what a store says, summed over its nodes:
the lease commands it served (INFO commandstats: EVALSHA + EVAL + ZREM), every
command's calls, its memory and keys, and the CPU seconds of its processes."""
import os
import subprocess
import time

import redis  # python3-redis

import bench_plan as plan
from bench_http import free_port
from bench_procs import _child_setup, log, proc_cpu_seconds, wait_port

# What a proxy sends: scripts. The binary before batching also released with a ZREM of
# its own (today's scripts run ZREM inside, which commandstats counts the same way).
LEASE_COMMANDS = ("cmdstat_evalsha", "cmdstat_eval")
CLIENT_RELEASE = "cmdstat_zrem"
READING_COMMANDS = ("cmdstat_info", "cmdstat_dbsize")  # what stats() itself sends


class Store:
    """The redis-server processes of one store (one, or the cluster's masters), as one."""

    def __init__(self, name, url, procs, ports):
        self.name, self.url, self.procs, self.ports = name, url, procs, ports
        self.client_release = False  # True for the binary before batching: its ZREMs came over the wire
        self.nodes = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=5) for p in ports]

    def stats(self):
        """{lease_calls, calls: {command: calls}, used_memory, keys}, summed over the nodes.
        INFO commandstats counts the commands the lease scripts run inside Redis too, so
        `calls` has more than what came over the wire; lease_calls is what did."""
        out = {"lease_calls": 0, "calls": {}, "used_memory": 0, "keys": 0}
        for n in self.nodes:
            for name, st in n.info("commandstats").items():
                if name in LEASE_COMMANDS or (self.client_release and name == CLIENT_RELEASE):
                    out["lease_calls"] += st["calls"]
                if name not in READING_COMMANDS:
                    name = name.replace("cmdstat_", "")
                    out["calls"][name] = out["calls"].get(name, 0) + st["calls"]
            out["used_memory"] += n.info("memory")["used_memory"]
            out["keys"] += n.dbsize()
        return out

    def cpu_seconds(self):
        return sum(proc_cpu_seconds(p.pid) for p in self.procs)

    def flushall(self):
        for n in self.nodes:
            n.flushall()


def _server_argv(port, workdir, extra=()):
    return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", workdir] + list(extra)


def start_single(procs, workdir, name):
    """One redis-server in workdir/name; returns its Store (url redis://127.0.0.1:PORT/0)."""
    d = os.path.join(workdir, name)
    os.makedirs(d)
    port = free_port()
    proc = procs.start(name, _server_argv(port, d), plan.LOAD_CPU)
    wait_port(port, proc)
    return Store(name, "redis://127.0.0.1:%d/0" % port, [proc], [port])


def start_cluster(procs, workdir, name, masters=3, timeout=30.0):
    """A Redis Cluster of `masters` masters and no replica, each node in a directory of its
    own with its cluster bus on a port picked here (not port + 10000, which may be taken
    or out of range); created with redis-cli --cluster create. Returns its Store once every
    node says cluster_state:ok and all of them agree on the slot map."""
    ports = [free_port() for _ in range(masters)]
    nodes = []
    for i, port in enumerate(ports):
        d = os.path.join(workdir, "%s-%d" % (name, i))
        os.makedirs(d)
        argv = _server_argv(port, d, [
            "--cluster-enabled", "yes", "--cluster-port", str(free_port()),
            "--cluster-config-file", "nodes-%d.conf" % port, "--cluster-node-timeout", "2000",
            "--cluster-require-full-coverage", "no"])
        nodes.append(procs.start("%s-%d" % (name, i), argv, plan.LOAD_CPU))
    for port, proc in zip(ports, nodes):
        wait_port(port, proc)
    create = ["redis-cli", "--cluster", "create"] + ["127.0.0.1:%d" % p for p in ports] + [
        "--cluster-replicas", "0", "--cluster-yes"]
    r = subprocess.run(create, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, preexec_fn=_child_setup(plan.LOAD_CPU))
    if r.returncode != 0 or "All 16384 slots covered" not in r.stdout:
        raise RuntimeError("redis-cli --cluster create exit %d:\n%s" % (r.returncode, r.stdout[-1000:]))
    store = Store(name, "redis+cluster://" + ",".join("127.0.0.1:%d" % p for p in ports), nodes, ports)
    deadline = time.monotonic() + timeout
    while True:
        problems = _cluster_problems(store)
        if not problems:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("redis cluster %s not ok after %.0f s: %s" % (ports, timeout, "; ".join(problems)))
        time.sleep(0.1)
    log("%s: cluster ok, masters on %s" % (name, ports))
    return store


def _cluster_problems(store):
    """Why the nodes do not yet form a healthy cluster ([] when they do)."""
    problems, maps = [], []
    for port, n in zip(store.ports, store.nodes):
        try:
            info = n.execute_command("CLUSTER", "INFO")
            info = info.decode() if isinstance(info, bytes) else str(info)
            maps.append(sorted((int(e[0]), int(e[1]), int(e[2][1])) for e in n.execute_command("CLUSTER", "SLOTS")))
        except redis.exceptions.RedisError as e:
            problems.append("%d: %s" % (port, e))
            continue
        if "cluster_state:ok" not in info:
            problems.append("%d: not cluster_state:ok" % port)
    if maps and any(m != maps[0] for m in maps):
        problems.append("the nodes disagree on the slot map")
    return problems
