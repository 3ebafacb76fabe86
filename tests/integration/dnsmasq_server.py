"""A DNS server of the test's own on loopback: dnsmasq (Debian's dnsmasq-base), for the
DNS tests. Nothing leaves the machine: --no-resolv --no-hosts, no upstream server,
and every name under the zone (default dns.test) answered authoritatively from a hosts
file the test writes (unknown names: NXDOMAIN with the zone's SOA, so negative answers
carry a TTL, RFC 2308). dnsmasq re-reads the file when it changes (--hostsdir), logs every
query (query_count), and can be stopped, hung (SIGSTOP) and resumed (signalled_process).

    dns = t.dns()                          # harness.TestContext: stopped at cleanup
    dns.set_records({"a.dns.test": ["127.0.0.1", "::1"]})
    cfg["dns"] = {"servers": [dns.server]}
    dns.query_count("a.dns.test")          # queries (A and AAAA each) seen so far
"""

import os
import re
import shutil
import socket
import struct
import subprocess
import time

from harness import TestFailure, _pdeathsig, free_port, log, SLOW
from signalled_process import SignalledProcess


def available():
    return shutil.which("dnsmasq") is not None


class Dnsmasq(SignalledProcess):
    def __init__(self, workdir, zone="dns.test", ttl=2):
        self.workdir = os.path.join(workdir, "dnsmasq")
        os.makedirs(os.path.join(self.workdir, "hosts"), exist_ok=True)
        self.zone, self.ttl = zone, ttl
        self.port = free_port()
        self.logfile = os.path.join(self.workdir, "queries.log")
        self.proc = None
        self._generation = 0

    @property
    def server(self):
        """dns.servers' entry."""
        return "127.0.0.1:%d" % self.port

    def set_records(self, records):
        """{name: [address, ...]}: the zone's records from now on (an atomic rename that
        dnsmasq notices; wait_for() confirms it answers the new ones)."""
        self._generation += 1
        hosts = os.path.join(self.workdir, "hosts")
        tmp = os.path.join(self.workdir, "records.tmp")
        with open(tmp, "w") as f:
            for name, addresses in records.items():
                for a in addresses:
                    f.write("%s %s\n" % (a, name))
        for old in os.listdir(hosts):
            os.unlink(os.path.join(hosts, old))
        os.rename(tmp, os.path.join(hosts, "records-%d" % self._generation))

    def start(self, timeout=10):
        if not os.path.exists(self.logfile):
            open(self.logfile, "w").close()
        self.proc = subprocess.Popen(
            ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
             "--port=%d" % self.port, "--listen-address=127.0.0.1", "--bind-interfaces",
             "--hostsdir=%s" % os.path.join(self.workdir, "hosts"),
             "--auth-zone=%s" % self.zone, "--auth-server=ns.%s,127.0.0.1" % self.zone,
             "--auth-ttl=%d" % self.ttl, "--local-ttl=%d" % self.ttl,
             "--log-queries", "--log-facility=%s" % self.logfile, "--pid-file=", "--user=", "--conf-file=/dev/null"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_pdeathsig)
        deadline = time.monotonic() + timeout * SLOW
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode("utf-8", "replace") if self.proc.poll() is not None else ""
                raise TestFailure("dnsmasq on port %d did not start: %s" % (self.port, err))
            time.sleep(0.02)
        log("dnsmasq pid %d on %s (zone %s, TTL %d s)" % (self.proc.pid, self.server, self.zone, self.ttl))
        return self

    def query(self, name, qtype=1, timeout=1.0):
        """(rcode, [addresses]) of one query of the test's own."""
        q = struct.pack(">HHHHHH", 0x5050, 0x0100, 1, 0, 0, 0)
        for label in name.split("."):
            q += bytes([len(label)]) + label.encode()
        q += b"\0" + struct.pack(">HH", qtype, 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(timeout)
        try:
            s.sendto(q, ("127.0.0.1", self.port))
            r = s.recv(4096)
        finally:
            s.close()
        rcode = struct.unpack(">H", r[2:4])[0] & 15
        addresses, ancount = [], struct.unpack(">H", r[6:8])[0]
        i = len(q)
        for _ in range(ancount):
            i += 2 if r[i] & 0xC0 == 0xC0 else r.index(b"\0", i) + 1 - i
            rtype, _, _, rdlen = struct.unpack(">HHIH", r[i:i + 10])
            data = r[i + 10:i + 10 + rdlen]
            if rtype == 1:
                addresses.append(socket.inet_ntop(socket.AF_INET, data))
            elif rtype == 28:
                addresses.append(socket.inet_ntop(socket.AF_INET6, data))
            i += 10 + rdlen
        return rcode, addresses

    def _answers(self):
        try:
            self.query("ns.%s" % self.zone, timeout=0.2)
            return True
        except OSError:
            return False

    def wait_for(self, name, addresses, timeout=5):
        """Until dnsmasq answers `name` with `addresses` (A and AAAA together)."""
        deadline = time.monotonic() + timeout * SLOW
        want = sorted(addresses)
        while True:
            got = sorted(self.query(name, 1)[1] + self.query(name, 28)[1])
            if got == want:
                return
            if time.monotonic() > deadline:
                raise TestFailure("dnsmasq answers %s with %s, not %s" % (name, got, want))
            time.sleep(0.05)

    def query_count(self, name):
        """Queries for `name` (one per type asked) the log shows so far; query() and
        wait_for() count too: compare counts taken around what the proxy does."""
        with open(self.logfile, errors="replace") as f:
            return sum(1 for line in f if re.search(r"\]: (auth|query)\[[A-Z]+\] %s from " % re.escape(name), line))
