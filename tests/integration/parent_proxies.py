"""Real parent proxies of the test's own on loopback, for the parent-proxy tests:
Squid 5.7 (squid-openssl) and tinyproxy 1.11, each started by PID with a config written
into the test's directory, dying with the test process (PR_SET_PDEATHSIG), and able to
be killed and started again on the same port.

    squid = t.parent("squid", user="pp", password="secret")   # basic auth (basic_ncsa_auth)
    tiny = t.parent("tinyproxy")
    cfg["parents"] = {"a": {"url": squid.url}, ...}
    squid.kill(); squid.start()
    squid.requests()   # its access log: one line per request it carried

Squid resolves names through a hosts file of the test's (`names`: {name: address});
tinyproxy through the system's resolver, so tests address it by IP literals.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness_checks import SLOW, TestFailure, log
from harness_raw import free_port
from harness_proxy import _pdeathsig

SQUID = "/usr/sbin/squid"
TINYPROXY = "/usr/bin/tinyproxy"
NCSA = "/usr/lib/squid/basic_ncsa_auth"


def available(kind):
    return os.access(SQUID if kind == "squid" else TINYPROXY, os.X_OK)


class ParentProxy:
    def __init__(self, kind, workdir, user=None, password=None, names=None):
        self.kind = kind
        self.port = free_port()
        self.user, self.password = user, password
        self.names = dict(names or {})
        # Squid drops root for its own user (proxy): its directory is one of its own, open
        # to that user (the test's directory is not), removed at stop().
        self.dir = tempfile.mkdtemp(prefix="pp-%s-" % kind)
        os.chmod(self.dir, 0o777)
        self.proc = None
        self.conf = self._write_config()

    @property
    def url(self):
        cred = "%s:%s@" % (self.user, self.password) if self.user else ""
        return "http://%s127.0.0.1:%d" % (cred, self.port)

    def _path(self, name):
        return os.path.join(self.dir, name)

    def _write_config(self):
        if self.kind == "squid":
            with open(self._path("hosts"), "w") as f:
                for name, address in self.names.items():
                    f.write("%s %s\n" % (address, name))
            os.chmod(self._path("hosts"), 0o644)
            lines = [
                "http_port 127.0.0.1:%d" % self.port,
                "pid_filename %s" % self._path("squid.pid"),
                "cache_log %s" % self._path("cache.log"),
                "access_log stdio:%s" % self._path("access.log"),
                "coredump_dir %s" % self.dir,
                "hosts_file %s" % self._path("hosts"),
                "dns_nameservers 127.0.0.1",
                "cache deny all",
                "cache_mem 8 MB",
                "visible_hostname squid-%d" % self.port,
                "shutdown_lifetime 0 seconds",
                "forwarded_for delete",
                "acl CONNECT method CONNECT",
            ]
            if self.user:
                r = subprocess.run(["openssl", "passwd", "-1", self.password], stdout=subprocess.PIPE, text=True,
                                   check=True)
                with open(self._path("passwd"), "w") as f:
                    f.write("%s:%s\n" % (self.user, r.stdout.strip()))
                os.chmod(self._path("passwd"), 0o644)
                lines += ["auth_param basic program %s %s" % (NCSA, self._path("passwd")),
                          "auth_param basic realm parent",
                          "acl authed proxy_auth REQUIRED",
                          "http_access allow authed",
                          "http_access deny all"]
            else:
                lines += ["http_access allow all"]
            path = self._path("squid.conf")
        else:
            lines = [
                "Port %d" % self.port,
                "Listen 127.0.0.1",
                "Timeout 60",
                "MaxClients 200",
                "Allow 127.0.0.1",
                "LogFile \"%s\"" % self._path("tinyproxy.log"),
                "LogLevel Connect",
                "PidFile \"%s\"" % self._path("tinyproxy.pid"),
                "ViaProxyName \"tinyproxy-parent\"",
            ]
            if self.user:
                lines.append("BasicAuth %s %s" % (self.user, self.password))
            path = self._path("tinyproxy.conf")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(path, 0o644)
        return path

    def start(self, timeout=20):
        argv = [SQUID, "-N", "-f", self.conf] if self.kind == "squid" else [TINYPROXY, "-d", "-c", self.conf]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(self._path("stdout"), "ab"),
                                     stderr=subprocess.STDOUT, preexec_fn=_pdeathsig, cwd=self.dir)
        deadline = time.monotonic() + timeout * SLOW
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise TestFailure("%s on port %d did not start: %s" % (self.kind, self.port, self.output_tail()))
            time.sleep(0.05)
        log("%s pid %d on 127.0.0.1:%d" % (self.kind, self.proc.pid, self.port))
        return self

    def output_tail(self, lines=20):
        out = []
        for name in ("stdout", "cache.log", "tinyproxy.log"):
            try:
                with open(self._path(name), errors="replace") as f:
                    out += ["%s: %s" % (name, line.rstrip()) for line in f.readlines()[-lines:]]
            except OSError:
                pass
        return "\n".join(out)

    def requests(self):
        """Squid: its access log's lines (one per request or tunnel it carried)."""
        try:
            with open(self._path("access.log")) as f:
                return [line.split() for line in f if line.strip()]
        except OSError:
            return []

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        # Squid's helpers and its kid: gone with their parent (pdeathsig does not reach them).
        pid_file = self._path("squid.pid")
        if os.path.exists(pid_file):
            try:
                with open(pid_file) as f:
                    os.kill(int(f.read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
            os.unlink(pid_file)

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def require(kind):
    if not available(kind):
        raise TestFailure("%s is not installed (scripts/install-deps.sh installs it)" % kind)
    return shutil.which(kind)
