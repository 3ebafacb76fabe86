"""A Redis master, its replica and three Sentinels of the test's own on loopback, for the
fleet tests (redis+sentinel://).

RedisSentinelSet(workdir, name="pp-master") has RedisStore's interface (redis_store.py):
url, client(), start(), kill(), pause(), resume(), stop(), where kill/pause/resume act on
the two data nodes and the sentinels keep running; plus a failover on demand:

    s = t.redis_sentinel()              # harness.TestContext: stopped at cleanup
    cfg["fleet"] = {"redis": s.url, ...}          # redis+sentinel://S1,S2,S3/pp-master
    killed = s.kill_master()            # time.monotonic() of the SIGKILL
    port, switched = s.wait_promotion(15)         # the new master, when +switch-master came
    s.start()                           # the killed node back, as a replica of the new master

The sentinels watch with down-after-milliseconds 1000, failover-timeout 5000, quorum 2.
start() returns once every sentinel knows the master, the replica (link up) and the two
other sentinels, so a failover can happen from then on. Every process is started by PID
(PR_SET_PDEATHSIG: call start() and kill_master() from the main thread), listens on
127.0.0.1 only and keeps no data (--save "" --appendonly no).
"""

import os
import shutil
import signal
import subprocess
import threading
import time

import redis  # python3-redis

from harness import SLOW, TestFailure, _pdeathsig, free_port, log

DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
QUORUM = 2


def available():
    return shutil.which("redis-server") is not None


class RedisSentinelSet:
    def __init__(self, workdir, name="pp-master"):
        self.name = name
        self.workdir = os.path.join(workdir, "sentinel-%d" % id(self))
        self.data_ports = [free_port(), free_port()]  # [0] starts as the master
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.data_procs = [None, None]
        self.sentinel_procs = [None, None, None]
        self._events = []  # (time.monotonic(), sentinel index, message) of +switch-master
        self._events_lock = threading.Lock()
        self._switched = threading.Event()
        self._generation = 0  # of kill_master(): a listener of an earlier one stops
        self._stop_watch = threading.Event()

    # -- the store interface (redis_store.RedisStore) ------------------------------
    @property
    def url(self):
        return "redis+sentinel://%s/%s" % (",".join("127.0.0.1:%d" % p for p in self.sentinel_ports), self.name)

    def client(self, timeout=2):
        """A plain client of the current master (as a sentinel names it)."""
        return redis.Redis(host="127.0.0.1", port=self.master_port(), socket_timeout=timeout)

    def start(self, timeout=30):
        """Start what is down: the data nodes first (the one the sentinels call master as
        master, the other as its replica; empty), then the sentinels; returns once the
        sentinels can fail over."""
        deadline = time.monotonic() + timeout * SLOW
        master = self.master_port() if any(self._running(p) for p in self.sentinel_procs) else self.data_ports[0]
        for i, port in enumerate(self.data_ports):
            if not self._running(self.data_procs[i]):
                self.data_procs[i] = self._spawn_data(i, None if port == master else master)
        for i, port in enumerate(self.data_ports):
            self._wait_ping(port, self.data_procs[i], deadline)
        for i in range(3):
            if not self._running(self.sentinel_procs[i]):
                self.sentinel_procs[i] = self._spawn_sentinel(i, master)
        for i, port in enumerate(self.sentinel_ports):
            self._wait_ping(port, self.sentinel_procs[i], deadline)
        master = self._wait_ready(deadline)
        log("redis sentinel set up: master %d, replica %d, sentinels %s"
            % (master, [p for p in self.data_ports if p != master][0], self.sentinel_ports))
        return self

    def kill(self):
        """SIGKILL the master and the replica; the sentinels stay."""
        for proc in self.data_procs:
            self._kill(proc)

    def pause(self):
        """SIGSTOP the master and the replica: a hung store."""
        for proc in self.data_procs:
            self._signal(proc, signal.SIGSTOP)

    def resume(self):
        for proc in self.data_procs:
            self._signal(proc, signal.SIGCONT)

    def stop(self):
        self._stop_watch.set()
        procs = [p for p in self.sentinel_procs + self.data_procs if p is not None]
        for proc in procs:
            self._signal(proc, signal.SIGCONT)
            self._signal(proc, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill(proc)

    # -- failover ------------------------------------------------------------------
    def master_port(self):
        """The master's port as the first sentinel that answers names it."""
        for port in self.sentinel_ports:
            try:
                addr = self._sentinel(port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
            except redis.exceptions.RedisError:
                continue
            if addr:
                return int(addr[1])
        raise TestFailure("no sentinel of %s names a master for %s" % (self.sentinel_ports, self.name))

    def kill_master(self):
        """SIGKILL the current master, with every sentinel's +switch-master already
        subscribed to; returns time.monotonic() of the kill."""
        master = self.master_port()
        self._watch()
        self._kill(self.data_procs[self.data_ports.index(master)])
        killed = time.monotonic()
        log("redis sentinel set: master %d killed" % master)
        return killed

    def failover(self):
        """SENTINEL FAILOVER: the master hands over to its replica and stays up as a
        replica (nothing is killed), with every sentinel's +switch-master already
        subscribed to; returns time.monotonic() of the command."""
        self._watch()
        asked = time.monotonic()
        self._sentinel(self.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", self.name)
        log("redis sentinel set: SENTINEL FAILOVER %s" % self.name)
        return asked

    def wait_promotion(self, timeout=15):
        """(new master port, time.monotonic() when a sentinel first published
        +switch-master) after kill_master(); TestFailure after `timeout` seconds."""
        if not self._switched.wait(timeout * SLOW):
            raise TestFailure("no sentinel published +switch-master within %.0f s" % (timeout * SLOW))
        with self._events_lock:
            when, index, message = min(self._events)
        parts = message.split()  # NAME old-ip old-port new-ip new-port
        log("redis sentinel set: sentinel %d published +switch-master %s" % (index, message))
        return int(parts[4]), when

    def _watch(self):
        """One thread per sentinel, subscribed before this returns, that records when
        +switch-master arrives."""
        with self._events_lock:
            self._events = []
            self._generation += 1
            generation = self._generation
        self._switched.clear()
        self._stop_watch.clear()
        ready = []
        for i, port in enumerate(self.sentinel_ports):
            ps = self._sentinel(port, timeout=None).pubsub()
            ps.subscribe("+switch-master")
            msg = ps.get_message(timeout=5)  # the subscription's confirmation
            if not msg or msg["type"] != "subscribe":
                raise TestFailure("subscribing to +switch-master on sentinel %d: %r" % (port, msg))
            ready.append((i, ps))
        for i, ps in ready:
            threading.Thread(target=self._listen, args=(i, ps, generation), daemon=True,
                             name="switch-master-%d" % i).start()

    def _listen(self, index, ps, generation):
        try:
            while not self._stop_watch.is_set() and generation == self._generation:
                msg = ps.get_message(timeout=0.2)
                if msg and msg["type"] == "message":
                    with self._events_lock:
                        if generation != self._generation:
                            return
                        self._events.append((time.monotonic(), index, msg["data"].decode()))
                    self._switched.set()
                    return
        except redis.exceptions.RedisError:
            pass
        finally:
            ps.close()

    # -- processes -----------------------------------------------------------------
    def _spawn_data(self, i, master):
        d = os.path.join(self.workdir, "data%d" % i)
        os.makedirs(d, exist_ok=True)
        cmd = ["redis-server", "--port", str(self.data_ports[i]), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", d, "--logfile", os.path.join(d, "redis.log"),
               "--repl-diskless-sync-delay", "0"]  # a replica's sync starts at once, not after 5 s
        if master is not None:
            cmd += ["--replicaof", "127.0.0.1", str(master)]
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, preexec_fn=_pdeathsig)

    def _spawn_sentinel(self, i, master):
        d = os.path.join(self.workdir, "sentinel%d" % i)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "sentinel.conf")  # the sentinel rewrites it: one per sentinel, writable
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write("\n".join([
                    "port %d" % self.sentinel_ports[i],
                    "bind 127.0.0.1",
                    "dir %s" % d,
                    "logfile %s" % os.path.join(d, "sentinel.log"),
                    "sentinel resolve-hostnames no",
                    "sentinel announce-ip 127.0.0.1",
                    "sentinel monitor %s 127.0.0.1 %d %d" % (self.name, master, QUORUM),
                    "sentinel down-after-milliseconds %s %d" % (self.name, DOWN_AFTER_MS),
                    "sentinel failover-timeout %s %d" % (self.name, FAILOVER_TIMEOUT_MS),
                    "sentinel parallel-syncs %s 1" % self.name, ""]))
        return subprocess.Popen(["redis-server", conf, "--sentinel"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_pdeathsig)

    @staticmethod
    def _sentinel(port, timeout=1):
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout, socket_connect_timeout=1)

    @staticmethod
    def _running(proc):
        return proc is not None and proc.poll() is None

    def _signal(self, proc, sig):
        if self._running(proc):
            os.kill(proc.pid, sig)

    def _kill(self, proc):
        if self._running(proc):
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGKILL)
        if proc is not None:
            proc.wait(timeout=10)

    def _wait_ping(self, port, proc, deadline):
        while True:
            try:
                if redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5).ping():
                    return
            except redis.exceptions.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise TestFailure("redis-server on %d did not start (logs under %s)" % (port, self.workdir))
            time.sleep(0.02)

    def _problems(self, master):
        """Why a failover could not happen yet ([] when it could)."""
        replica = [p for p in self.data_ports if p != master][0]
        problems = []
        try:
            role = redis.Redis(host="127.0.0.1", port=replica, socket_timeout=1).info("replication")
            if role.get("master_link_status") != "up" or role.get("master_port") != master:
                problems.append("replica %d: link %s to %s" % (replica, role.get("master_link_status"),
                                                                role.get("master_port")))
        except redis.exceptions.RedisError as e:
            problems.append("replica %d: %s" % (replica, e))
        for port in self.sentinel_ports:
            try:
                s = self._sentinel(port)
                addr = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
                replicas = s.execute_command("SENTINEL", "REPLICAS", self.name)
                others = s.execute_command("SENTINEL", "SENTINELS", self.name)
            except redis.exceptions.RedisError as e:
                problems.append("sentinel %d: %s" % (port, e))
                continue
            if not addr or int(addr[1]) != master:
                problems.append("sentinel %d names master %s" % (port, addr))
            good = [r for r in replicas if self._fields(r).get("port") == str(replica)
                    and "down" not in self._fields(r).get("flags", "") and "disconnected" not in self._fields(r).get("flags", "")]
            if not good:
                problems.append("sentinel %d does not see replica %d up" % (port, replica))
            if len(others) != 2:
                problems.append("sentinel %d knows %d other sentinels" % (port, len(others)))
        return problems

    @staticmethod
    def _fields(entry):
        """A SENTINEL REPLICAS/SENTINELS entry (flat [k, v, k, v, ...] or a dict) as a str dict."""
        if isinstance(entry, dict):
            return {str(k): str(v) for k, v in entry.items()}
        items = [x.decode() if isinstance(x, bytes) else str(x) for x in entry]
        return dict(zip(items[0::2], items[1::2]))

    def _wait_ready(self, deadline):
        """The master's port once a failover could happen. The master is asked again each
        round: a failover the sentinels began while the data nodes were down may end
        with the other node promoted."""
        while True:
            try:
                master = self.master_port()
                problems = self._problems(master)
            except TestFailure as e:
                problems = [str(e)]
            if not problems:
                return master
            if time.monotonic() > deadline:
                raise TestFailure("redis sentinel set not ready: %s" % "; ".join(problems))
            time.sleep(0.1)
