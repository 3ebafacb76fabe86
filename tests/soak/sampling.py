"""Observing the proxy process: RSS, CPU time and open descriptors from /proc (and,
when descriptors leak, what they are), the 5-second samples with the proxy's gauges,
their one-line log form and their CSV."""

import collections
import os
import re

import harness as H


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            p = f.read().rsplit(")", 1)[1].split()
        return (int(p[11]) + int(p[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def fd_table(pid):
    out = {}
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                pass
    except OSError:
        pass
    return out


TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def describe_sockets(inodes):
    """inode -> 'local -> remote STATE' from /proc/net/tcp (the proxy's net namespace
    is ours)."""
    out = {}
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                p = line.split()
                if p[9] in inodes:
                    lp = int(p[1].split(":")[1], 16)
                    rp = int(p[2].split(":")[1], 16)
                    out[p[9]] = ":%d -> :%d %s" % (lp, rp, TCP_STATES.get(p[3], p[3]))
    except OSError:
        pass
    return out


def describe_new_fds(pid, base_table):
    now = fd_table(pid)
    new = {fd: tgt for fd, tgt in now.items() if base_table.get(fd) != tgt}
    gone = sorted(fd for fd, tgt in base_table.items() if now.get(fd) != tgt)
    if not new and not gone:
        return "none"
    inodes = set()
    for tgt in new.values():
        m = re.match(r"socket:\[(\d+)\]", tgt)
        if m:
            inodes.add(m.group(1))
    socks = describe_sockets(inodes)
    parts = []
    for fd, tgt in sorted(new.items()):
        m = re.match(r"socket:\[(\d+)\]", tgt)
        extra = (" " + socks[m.group(1)]) if m and m.group(1) in socks else ""
        parts.append("%d=%s%s" % (fd, tgt, extra))
    if gone:
        parts.append("gone since the baseline: " + ", ".join(
            "%d=%s" % (fd, base_table[fd]) for fd in gone))
    return ", ".join(parts)


class Sample:
    __slots__ = ("t", "rss", "fds", "requests", "labels", "client_conns", "upstream",
                 "tunnels", "hosts", "fleet_up")


def take_sample(proxy, tally, t):
    s = Sample()
    s.t = t
    s.rss = rss_kib(proxy.pid)
    s.fds = fd_count(proxy.pid)
    s.requests, s.labels = tally.snapshot()
    s.client_conns = s.upstream = s.tunnels = s.hosts = s.fleet_up = None
    try:
        m = proxy.metrics()
        s.client_conns = H.msum(m, "politeproxy_client_connections")
        s.upstream = H.mget(m, "politeproxy_upstream_connections", protocol="http1")
        s.tunnels = H.mget(m, "politeproxy_upstream_connections", protocol="tunnel")
        s.hosts = H.mget(m, "politeproxy_hosts_tracked")
        s.fleet_up = H.mget(m, "politeproxy_fleet_store_up")   # None without a fleet
    except Exception as e:  # noqa: BLE001
        tally.note_warn("admin /metrics failed during a sample", "%s: %s" % (type(e).__name__, e))
    return s


def status_classes(labels):
    c = collections.Counter()
    for lab, n in labels.items():
        if lab[:1].isdigit():
            c[lab[0] + "xx"] += n
        elif lab.startswith("conn-error"):
            c["err"] += n
        else:
            c["other"] += n
    return c


def fmt_mib(kib):
    return "-" if kib is None else "%.1f" % (kib / 1024.0)


def fmt_count(v):
    return "-" if v is None else "%d" % v


def sample_line(s, prev, reloads_valid, reloads_invalid):
    """The line logged for sample s (prev: the sample before it)."""
    cls = status_classes(s.labels)
    return ("t=%4.0fs rss=%s MiB fds=%s req=%d (+%.0f/s) 2xx=%d 4xx=%d 5xx=%d "
            "other=%d err=%d conns=%s up=%s tun=%s hosts=%s reloads=%d/%d"
            % (s.t, fmt_mib(s.rss), s.fds, s.requests,
               (s.requests - prev.requests) / max(0.001, s.t - prev.t),
               cls["2xx"], cls["4xx"], cls["5xx"], cls["other"], cls["err"],
               fmt_count(s.client_conns), fmt_count(s.upstream), fmt_count(s.tunnels),
               fmt_count(s.hosts), reloads_valid, reloads_invalid))


def other_proxies_line(pairs):
    """The line logged for the other proxies' samples: [(name, sample)]."""
    return "    " + " | ".join(
        "%s rss=%s MiB fds=%s conns=%s up=%s hosts=%s store=%s" % (
            name, fmt_mib(s.rss), fmt_count(s.fds), fmt_count(s.client_conns),
            fmt_count(s.upstream), fmt_count(s.hosts), fmt_count(s.fleet_up))
        for name, s in pairs)


def write_csv(path, samples):
    with open(path, "w") as f:
        f.write("t_s,rss_kib,fds,requests,client_conns,upstream_conns,tunnels,hosts_tracked\n")
        for s in samples:
            f.write("%.1f,%s,%s,%d,%s,%s,%s,%s\n" % (
                s.t, s.rss, s.fds, s.requests, fmt_count(s.client_conns), fmt_count(s.upstream),
                fmt_count(s.tunnels), fmt_count(s.hosts)))
