"""A redis-server of the test's own on loopback, for the fleet tests.

Started by PID on a free port with no persistence (--save "" --appendonly no), dies with
the test process (PR_SET_PDEATHSIG), and can be killed, hung (SIGSTOP), resumed and
restarted on the same port, so a test can take the store away and bring it back.

    store = t.redis()            # harness.TestContext: stopped at cleanup
    cfg["fleet"] = {"redis": store.url, ...}
    store.kill(); store.start()  # the same port, empty
    store.client().info("commandstats")
"""

import os
import shutil
import subprocess
import time

import redis  # python3-redis

from harness import TestFailure, _pdeathsig, free_port, log, SLOW
from signalled_process import SignalledProcess


def available():
    return shutil.which("redis-server") is not None


class RedisStore(SignalledProcess):
    def __init__(self, workdir, port=None):
        self.port = port or free_port()
        self.workdir = workdir
        self.proc = None

    @property
    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def client(self, timeout=2):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=timeout)

    def start(self, timeout=10):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.workdir, "--logfile", os.path.join(self.workdir, "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_pdeathsig)
        deadline = time.monotonic() + timeout * SLOW
        while True:
            try:
                if self.client(timeout=0.5).ping():
                    break
            except redis.exceptions.ConnectionError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise TestFailure("redis-server on port %d did not start" % self.port)
            time.sleep(0.02)
        log("redis-server pid %d on 127.0.0.1:%d" % (self.proc.pid, self.port))
        return self

