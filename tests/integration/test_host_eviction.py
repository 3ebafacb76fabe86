#!/usr/bin/python3
"""An idle host's state is forgotten after `limits.host_idle_ttl`, and not before: 40
hosts, one request each, with a TTL of 12 s. politeproxy_hosts_tracked still counts all
40 when the first of them has been idle 10 s, and none within TTL + a tenth of it + a
housekeeping tick (+ 2 s of slack) after the last. (At 12 s a pass over the host table
takes two ticks, 14 of its 16 shards a tick: host_gates::eviction_shards_per_tick, whose
rule the unit tests pin; this test holds for a pass every tick too.)"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOSTS = 40
TTL = 12.0


def tracked(proxy):
    return H.mget(proxy.metrics(), "politeproxy_hosts_tracked")


def test(t):
    origin = t.origin()
    cfg = H.base_config()
    cfg["limits"] = {"host_idle_ttl": "%ds" % TTL}
    proxy = t.proxy(cfg)
    first = time.monotonic()  # before the first host's use: it is idle at most this long
    for i in range(HOSTS):
        r = H.request(proxy, "http://e%02d.test:%d/one" % (i, origin.port))
        H.check(r.error is None and r.status == 200, "e%02d.test: %r" % (i, r))
    last = time.monotonic()  # the last host's last use: at most now
    H.check(tracked(proxy) == HOSTS, "hosts_tracked %s after %d hosts, expected %d" % (tracked(proxy), HOSTS, HOSTS))

    time.sleep(max(0.0, first + TTL - 2.0 - time.monotonic()))
    early = tracked(proxy)
    H.log("hosts_tracked %.1f s after the first request (%.1f s after the last): %s"
          % (time.monotonic() - first, time.monotonic() - last, early))
    H.check(early == HOSTS, "hosts forgotten before their TTL (%.0f s): %s of %d still tracked %.1f s after the first"
            % (TTL, early, HOSTS, time.monotonic() - first))

    deadline = last + TTL * 1.1 + 1.0 + 2.0
    gone = H.wait_until(lambda: tracked(proxy) == 0, max(0.0, deadline - time.monotonic()), interval=0.1)
    H.log("hosts_tracked 0 %.1f s after the last request" % (time.monotonic() - last))
    H.check(gone, "%s of %d hosts still tracked %.1f s after their last request (TTL %.0f s)"
            % (tracked(proxy), HOSTS, time.monotonic() - last, TTL))


if __name__ == "__main__":
    H.main(test, timeout=60)
