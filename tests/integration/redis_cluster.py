"""A Redis Cluster of the test's own on loopback, for the fleet tests (redis+cluster://).

RedisCluster(workdir, masters=3) has RedisStore's interface (redis_store.py): url,
client(), start(), kill(), pause(), resume(), stop(), where client() is a ClusterClient
(keys() and info() over every master, other commands routed by slot); plus per-node
control and the manual resharding steps, so a test can lose one node or move one slot
under load:

    cluster = t.redis_cluster()          # harness.TestContext: stopped at cleanup
    cfg["fleet"] = {"redis": cluster.url, ...}
    cluster.slot_of("pp:{a.test}:leases"); cluster.owner_port(slot)
    cluster.kill_node(1); cluster.start_node(1)   # the same port and nodes.conf, empty
    cluster.migrate_slot(slot, 2, pause_between_keys=0.2, hold_open=1.0)  # from a thread

Every node is a master (no replicas), started by PID with no persistence, dies with the
test process (PR_SET_PDEATHSIG: start nodes from the main thread), listens on
127.0.0.1 only, with its cluster bus on a port of its own (--cluster-port). A node that
is killed keeps its slots (there is no replica to take them): the keys of those slots
are unreachable until it comes back, empty, with its nodes.conf.
"""

import os
import shutil
import signal
import subprocess
import threading
import time

import redis  # python3-redis
import redis.cluster
from redis.crc import key_slot

from harness import SLOW, TestFailure, _pdeathsig, free_port, log

SLOTS = 16384
NODE_TIMEOUT_MS = 1000


def available():
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


def _sum_info(parts):
    """INFO dicts of several nodes as one: numbers added, nested dicts merged the same way."""
    out = {}
    for part in parts:
        for k, v in part.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, dict)):
                out.setdefault(k, v)
            elif isinstance(v, dict):
                out[k] = _sum_info([out.get(k, {}), v])
            else:
                out[k] = out.get(k, 0) + v
    if "calls" in out and "usec_per_call" in out:  # a mean, not a sum
        out["usec_per_call"] = out["usec"] / out["calls"] if out["calls"] else 0.0
    return out


class ClusterClient:
    """What a test asks of "the store", across the cluster: keys() is the union over
    the masters, info() their sum, flushall()/script_flush() go to each; any other
    command goes to a redis.cluster.RedisCluster (slot routing, MOVED/ASK)."""

    def __init__(self, ports, timeout=2):
        self._nodes = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=timeout) for p in ports]
        self._ports = list(ports)
        self._timeout = timeout
        self._cluster = None

    def keys(self, pattern="*"):
        out = []
        for n in self._nodes:
            out.extend(n.keys(pattern))
        return out

    def info(self, section=None):
        return _sum_info([n.info(section) if section else n.info() for n in self._nodes])

    def flushall(self):
        return all(n.flushall() for n in self._nodes)

    def script_flush(self):
        return all(n.script_flush() for n in self._nodes)

    def dbsize(self):
        return sum(n.dbsize() for n in self._nodes)

    def ping(self):
        return all(n.ping() for n in self._nodes)

    def __getattr__(self, name):
        if self._cluster is None:
            self._cluster = redis.cluster.RedisCluster(
                startup_nodes=[redis.cluster.ClusterNode("127.0.0.1", p) for p in self._ports],
                socket_timeout=self._timeout)
        return getattr(self._cluster, name)


class RedisCluster:
    def __init__(self, workdir, masters=3):
        self.workdir = os.path.join(workdir, "cluster-%d" % id(self))
        self.nodes = [free_port() for _ in range(masters)]
        self.bus_ports = [free_port() for _ in range(masters)]
        self.dirs = [os.path.join(self.workdir, "node%d" % i) for i in range(masters)]
        self.procs = [None] * masters
        self.ids = [None] * masters
        self._created = False
        self._lock = threading.Lock()

    # -- the store interface (redis_store.RedisStore) ------------------------------
    @property
    def url(self):
        return "redis+cluster://" + ",".join("127.0.0.1:%d" % p for p in self.nodes)

    def client(self, timeout=2):
        """A ClusterClient over the nodes that run now (keys(), info() across them)."""
        return ClusterClient([p for i, p in enumerate(self.nodes) if self.running(i)], timeout)

    def node_client(self, i, timeout=2):
        """A plain client of node i."""
        return redis.Redis(host="127.0.0.1", port=self.nodes[i], socket_timeout=timeout)

    def start(self, timeout=30):
        """The first time: start the nodes and create the cluster; after kill(): restart
        every node that is down on its port with its nodes.conf (empty). Returns when
        every node says cluster_state:ok and sees every other one."""
        deadline = time.monotonic() + timeout * SLOW
        down = [i for i in range(len(self.nodes)) if not self.running(i)]
        for i in down:
            self._spawn(i)
        for i in down:
            self._wait_ping(i, deadline)
        if not self._created:
            self._create(deadline)
        self.ids = [self.node_client(i).execute_command("CLUSTER", "MYID").decode() for i in range(len(self.nodes))]
        self.wait_ok(deadline - time.monotonic())
        log("redis cluster up: masters %s (pids %s)" % (self.nodes, [p.pid for p in self.procs]))
        return self

    def kill(self):
        """SIGKILL every node: connections are reset, the data is gone."""
        for i in range(len(self.nodes)):
            self.kill_node(i)

    def pause(self):
        """SIGSTOP every node: a hung store; connections stay open and nothing answers."""
        for i in range(len(self.nodes)):
            self._signal(i, signal.SIGSTOP)

    def resume(self):
        for i in range(len(self.nodes)):
            self._signal(i, signal.SIGCONT)

    def stop(self):
        for i in range(len(self.nodes)):
            self._signal(i, signal.SIGCONT)
            self._signal(i, signal.SIGTERM)
        for i, proc in enumerate(self.procs):
            if proc is None:
                continue
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill_node(i)

    # -- one node ------------------------------------------------------------------
    def running(self, i):
        return self.procs[i] is not None and self.procs[i].poll() is None

    def kill_node(self, i):
        """SIGKILL node i; it keeps its slots in the others' view (marked fail)."""
        self._signal(i, signal.SIGCONT)
        self._signal(i, signal.SIGKILL)
        if self.procs[i] is not None:
            self.procs[i].wait(timeout=10)

    def start_node(self, i, timeout=20):
        """Node i again on its port, with its nodes.conf and no data; returns once the
        cluster is ok on every node and no node flags another as failing."""
        deadline = time.monotonic() + timeout * SLOW
        if not self.running(i):
            self._spawn(i)
            self._wait_ping(i, deadline)
        self.wait_ok(deadline - time.monotonic())
        log("redis cluster node %d back on %d" % (i, self.nodes[i]))
        return self

    def _spawn(self, i):
        os.makedirs(self.dirs[i], exist_ok=True)
        port = self.nodes[i]
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
               "--cluster-enabled", "yes", "--cluster-port", str(self.bus_ports[i]),
               "--cluster-config-file", "nodes-%d.conf" % port,
               "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--cluster-require-full-coverage", "no",
               "--save", "", "--appendonly", "no", "--dir", self.dirs[i],
               "--logfile", os.path.join(self.dirs[i], "redis.log")]
        self.procs[i] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, preexec_fn=_pdeathsig)

    def _wait_ping(self, i, deadline):
        while True:
            try:
                if self.node_client(i, timeout=0.5).ping():
                    return
            except redis.exceptions.ConnectionError:
                pass
            if self.procs[i].poll() is not None or time.monotonic() > deadline:
                raise TestFailure("cluster node %d (redis-server on %d) did not start; its log: %s"
                                  % (i, self.nodes[i], os.path.join(self.dirs[i], "redis.log")))
            time.sleep(0.02)

    def _signal(self, i, sig):
        if self.running(i):
            os.kill(self.procs[i].pid, sig)

    def _create(self, deadline):
        cmd = ["redis-cli", "--cluster", "create"] + ["127.0.0.1:%d" % p for p in self.nodes] + [
            "--cluster-replicas", "0", "--cluster-yes"]
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=max(1.0, deadline - time.monotonic()), preexec_fn=_pdeathsig)
        out = r.stdout.decode("utf-8", "replace")
        if r.returncode != 0 or "All 16384 slots covered" not in out:
            raise TestFailure("redis-cli --cluster create failed (%d):\n%s" % (r.returncode, out))
        self._created = True

    # -- the cluster's view ----------------------------------------------------------
    def _problems(self):
        """Why the running nodes do not yet form a healthy cluster ([] when they do)."""
        up = [i for i in range(len(self.nodes)) if self.running(i)]
        up_ids = {self.ids[i] for i in up}
        problems, maps = [], []
        for i in up:
            try:
                c = self.node_client(i, timeout=1)
                info = c.execute_command("CLUSTER", "INFO").decode()
                nodes = c.execute_command("CLUSTER", "NODES").decode()
                maps.append(self._slot_map(c))
            except redis.exceptions.RedisError as e:
                problems.append("node %d: %s" % (i, e))
                continue
            if "cluster_state:ok" not in info:
                problems.append("node %d: not cluster_state:ok" % i)
            for line in nodes.splitlines():
                f = line.split()
                if len(f) >= 8 and f[0] in up_ids and (
                        "fail" in f[2] or "handshake" in f[2] or "noaddr" in f[2] or f[7] != "connected"):
                    problems.append("node %d sees %s as %s/%s" % (i, f[1], f[2], f[7]))
        if maps and any(m != maps[0] for m in maps):
            problems.append("the nodes disagree on the slot map")
        return problems

    def wait_ok(self, timeout=20):
        deadline = time.monotonic() + max(timeout, 0.5)
        while True:
            problems = self._problems()
            if not problems:
                return
            if time.monotonic() > deadline:
                raise TestFailure("redis cluster %s not healthy: %s" % (self.nodes, "; ".join(problems)))
            time.sleep(0.05)

    @staticmethod
    def _slot_map(c):
        """[(first, last, port)] from CLUSTER SLOTS, sorted."""
        # "CLUSTER", "SLOTS" as two words: redis-py leaves the reply as the server sent it
        return sorted((int(e[0]), int(e[1]), int(e[2][1])) for e in c.execute_command("CLUSTER", "SLOTS"))

    def slot_map(self):
        """[(first, last, port)] as a running node sees it."""
        for i in range(len(self.nodes)):
            if self.running(i):
                return self._slot_map(self.node_client(i))
        raise TestFailure("no cluster node is running")

    @staticmethod
    def slot_of(key):
        """The hash slot of `key` (CRC16 of its {hash tag}, mod 16384), as CLUSTER KEYSLOT says."""
        return key_slot(key.encode() if isinstance(key, str) else key)

    def owner_port(self, slot):
        for first, last, port in self.slot_map():
            if first <= slot <= last:
                return port
        raise TestFailure("no node serves slot %d" % slot)

    def owner_index(self, slot):
        return self.nodes.index(self.owner_port(slot))

    # -- resharding ----------------------------------------------------------------
    def migrate_slot(self, slot, dst_index, pause_between_keys=0.0, hold_open=0.0, batch=100):
        """Move `slot` to node dst_index by hand, as redis-cli --cluster reshard would:
        IMPORTING on the destination, MIGRATING on the source, MIGRATE of the keys that
        CLUSTER GETKEYSINSLOT lists (one at a time with `pause_between_keys` seconds
        between them, else in batches), then the slot stays open `hold_open` seconds more
        (keys still on the source keep moving), then SETSLOT NODE on every running master,
        the destination first. Safe to call from a thread while load runs (its own
        connections). Returns {slot, src, dst, keys, opened, closed} (ports, count,
        time.monotonic())."""
        with self._lock:  # one migration at a time
            src_port = self.owner_port(slot)
            src_index = self.nodes.index(src_port)
            if src_index == dst_index:
                raise TestFailure("slot %d is already on node %d" % (slot, dst_index))
            src, dst = self.node_client(src_index, timeout=5), self.node_client(dst_index, timeout=5)
            dst_port = self.nodes[dst_index]
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.ids[src_index])
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.ids[dst_index])
            opened = time.monotonic()
            moved = self._move_keys(src, dst_port, slot, pause_between_keys, batch)
            hold_end = time.monotonic() + hold_open
            while time.monotonic() < hold_end:
                time.sleep(min(0.05, max(0.0, hold_end - time.monotonic())))
                moved += self._move_keys(src, dst_port, slot, pause_between_keys, batch)
            moved += self._move_keys(src, dst_port, slot, 0.0, batch)
            order = [dst_index, src_index] + [i for i in range(len(self.nodes)) if i not in (dst_index, src_index)]
            for i in order:
                if self.running(i):
                    self.node_client(i, timeout=5).execute_command(
                        "CLUSTER", "SETSLOT", slot, "NODE", self.ids[dst_index])
            closed = time.monotonic()
        log("slot %d moved from %d to %d: %d keys, open %.2f s" % (slot, src_port, dst_port, moved, closed - opened))
        return {"slot": slot, "src": src_port, "dst": dst_port, "keys": moved, "opened": opened, "closed": closed}

    @staticmethod
    def _move_keys(src, dst_port, slot, pause, batch):
        moved = 0
        while True:
            keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1 if pause else batch)
            if not keys:
                return moved
            # REPLACE: a key the proxies made on the destination (an ASK) never blocks the move
            reply = src.execute_command("MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "REPLACE", "KEYS", *keys)
            if reply not in (b"OK", b"NOKEY", "OK", "NOKEY", True):
                raise TestFailure("MIGRATE of %s answered %r" % (keys, reply))
            moved += len(keys)
            if pause:
                time.sleep(pause)
