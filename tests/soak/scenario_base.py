"""What every scenario shares (ScenarioBase): the proxy, the origins, the tally and the
deadlines, the choice of a host, and the judging of a response: the expected status
for the host, the body's integrity, nothing after a Connection: close response; and the
recording of an answer checked against its request's id (record_tagged, see tagging.py)."""

import hashlib
import json
import time

from soak_config import FAULTY, HEALTHY, SCENARIO_BUDGET, THROTTLED, pattern


def stray_kind(method):
    if method == "HEAD":
        return "a body after a HEAD response (RFC 9110 9.3.2)"
    return "bytes after the response (more than one response?)"


class ScenarioBase:
    """A scenario is a method scn_NAME(rng) of a subclass: it opens its own
    connection(s) and records every request it makes in the tally."""

    def __init__(self, proxy, origin, faults, echo, tally, load_end, stop, desync=None,
                 fleet=None):
        self.proxy, self.origin, self.faults, self.echo = proxy, origin, faults, echo
        self.tally, self.load_end, self.stop = tally, load_end, stop
        self.desync = desync     # desync_origin.DesyncOrigin
        self.fleet = fleet       # fleet.Fleet: its proxies, the TLS origin, the outage

    def pick_host(self, rng):
        return rng.choice(HEALTHY) if rng.random() < 0.9 else rng.choice(THROTTLED + FAULTY)

    def expected_ok(self, host, resp, extra=()):
        """Is this status what the host may answer? (unexpected ones are warnings)"""
        if resp.label in ("200",) + tuple(extra):
            return True
        if host not in HEALTHY and resp.label == "503:connection_limit_reached":
            return True  # a host paused by its own 429/503/faults: parked too long
        return False

    def check_body(self, resp, size=None, sent=None):
        """Integrity of an origin 200: None when fine, else a failure description."""
        if resp.proxy_error or resp.status != 200:
            return None
        if size is not None and resp.body != pattern(size):
            return "body of size=%d came back as %d bytes%s" % (
                size, len(resp.body), "" if len(resp.body) != size else " (content differs)")
        if sent is not None:
            try:
                j = json.loads(resp.body.decode())
            except ValueError:
                return "echo response not JSON: %r" % resp.body[:80]
            if j.get("length") != len(sent) or j.get("sha256") != hashlib.sha256(sent).hexdigest():
                return "origin received %s bytes (sha %s...), client sent %d" % (
                    j.get("length"), str(j.get("sha256"))[:12], len(sent))
        return None

    def finish_close(self, scn, c, resp, host, extra_ok=(), size=None, sent=None,
                     method="GET"):
        """Common end of a Connection: close exchange: judge, check nothing follows."""
        fail = warn = None
        detail = ""
        bad = self.check_body(resp, size=size, sent=sent)
        if bad:
            fail, detail = "corrupt body", bad
        after = c.wait_eof(2.0)
        if after == "data" and not fail:
            fail, detail = stray_kind(method), "%s %r" % (host, c.buf[:80])
        elif after == "open" and not fail:
            warn, detail = "connection open 2 s after a Connection: close response", resp.label
        if not fail and not warn and not self.expected_ok(host, resp, extra_ok):
            warn, detail = "unexpected status for %s" % scn, "%s %s" % (
                host, resp.hd.get("proxy-status", ""))
        if not fail and not warn and resp.proxy_error == "connection_limit_reached" and \
                "retry-after" not in resp.hd:
            warn, detail = "proxy 503 without Retry-After", host
        if not fail and not warn and not resp.proxy_error and "proxy-status" not in resp.hd:
            warn, detail = "origin response without Proxy-Status", resp.label
        self.tally.record(scn, resp.label, fail=fail, warn=warn, detail=detail)

    def record_tagged(self, scn, label, fail, warn, detail, c=None, closing=False,
                      method="GET", matched=False):
        """Records an answer checked against its request's id (matched: it was the
        origin's, and carried the id); on the last answer of a connection (closing) also
        checks that nothing follows it."""
        if closing and c is not None and not fail:
            after = c.wait_eof(2.0)
            if after == "data":
                fail, detail = stray_kind(method), "%s %r" % (detail, c.buf[:80])
            elif after == "open" and not warn:
                warn, detail = "connection open 2 s after a Connection: close response", label
        elif c is not None and c.buf and not fail:
            # nothing was pipelined: the next response would be read from these bytes
            fail, detail = stray_kind(method), "%s %r" % (detail, c.buf[:80])
        if matched and not fail:
            self.tally.count("origin answers matched to their request by id")
        self.tally.record(scn, label, fail=fail, warn=warn, detail=detail)
        return fail

    def conn_fail(self, scn, e, host):
        self.tally.record(scn, "conn-error:" + e.kind,
                          fail="connection error the client did not cause",
                          detail="%s: %s" % (host, e))

    def deadline(self):
        return min(time.monotonic() + SCENARIO_BUDGET, self.load_end + SCENARIO_BUDGET)

    def _aborted(self, scn, c, rng, note="aborted"):
        """Close as planned (with RST now and then) and count the client's own ending."""
        c.close(rst=rng.random() < 0.4)
        self.tally.record(scn, note)
