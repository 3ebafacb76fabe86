"""h2c clients (HTTP/2 with prior knowledge on the proxy's plain port, h2c_client.py):
one connection, 1-3 rounds of 2-8 streams opened at once, each with its own id, to the
healthy hosts of origin.py (its JSON echo names the id; now and then a delay) and to the
shared desync hosts (random kinds, as scenarios_desync). Every stream's answer must be
its own; a stream reset by the proxy or a connection that ends early is a failure."""

import time

from h2c_client import H2Conn, H2Error
from scenario_base import ScenarioBase
from soak_config import DESYNC_SHARED, HEALTHY, MAX_WAIT, RESPONSE_HEADERS
from tagging import (KINDS, judge_desync, judge_echo, label_of, new_id, pick_shared_kind,
                     proxy_error_of)


class H2cScenarios(ScenarioBase):
    def _h2c_plan(self, rng):
        """(authority, path, method, host, kind or None for origin.py's echo, id)"""
        if rng.random() < 0.7:
            host = rng.choice(HEALTHY)
            rid = new_id("h")
            path = "/h2c?id=%s" % rid
            if rng.random() < 0.3:
                path += "&delay=%.2f" % rng.uniform(0.05, 0.5)
            return "%s:%d" % (host, self.origin.port), path, "GET", host, None, rid
        host = rng.choice(DESYNC_SHARED)
        kind = pick_shared_kind(rng)
        rid = new_id("x")
        return ("%s:%d" % (host, self.desync.port), "/dz/%s?id=%s" % (kind, rid),
                KINDS[kind][0], host, kind, rid)

    def _h2c_judge(self, st, host, kind, rid):
        scn = "h2c:" + (kind or "echo")
        if st["reset"] is not None:
            self.tally.record(scn, "rst_stream:%d" % st["reset"],
                              fail="stream reset by the proxy", detail="%s id %s" % (host, rid))
            return
        hd = st["headers"]
        perr = proxy_error_of(hd.get("proxy-status"))
        label = label_of(st["status"] or 0, perr)
        if kind is None:
            fail, detail = judge_echo(rid, st["status"], st["body"], perr)
            warn = None
            if not fail and label != "200":
                warn, detail = "unexpected status for h2c:echo", "%s id %s %s" % (
                    host, rid, hd.get("proxy-status", ""))
        else:
            fail, warn, detail = judge_desync(kind, rid, st["status"], hd.get("x-answer-to"),
                                              st["body"], perr, st["interim"])
        if not fail and not warn and not perr and "proxy-status" not in hd:
            warn, detail = "origin response without Proxy-Status", label
        self.record_tagged(scn, label, fail, warn, "%s %s" % (host, detail), matched=not perr)

    def scn_h2c(self, rng):
        c = H2Conn(self.proxy.port, self.deadline())
        plan = []
        try:
            for rnd in range(rng.randint(1, 3)):
                if rnd and (self.stop.is_set()
                            or c.remaining() < MAX_WAIT + RESPONSE_HEADERS + 5):
                    break
                plan = []
                for _ in range(rng.randint(2, 8)):
                    auth, path, method, host, kind, rid = self._h2c_plan(rng)
                    sid = c.request(auth, path, method, [("x-req-id", rid)])
                    plan.append((sid, host, kind, rid))
                c.flush()
                c.pump([p[0] for p in plan])
                for sid, host, kind, rid in plan:
                    self._h2c_judge(c.streams[sid], host, kind, rid)
                plan = []
                if c.goaway:
                    self.tally.record("h2c", "goaway:%d" % c.goaway, fail="GOAWAY with an"
                                      " error from the proxy", detail="code %d" % c.goaway)
                    return
                if rng.random() < 0.5:
                    time.sleep(rng.uniform(0.01, 0.5))
        except H2Error as e:
            # the streams that ended are judged; the others failed with the connection
            for sid, host, kind, rid in plan:
                if c.done([sid]):
                    self._h2c_judge(c.streams[sid], host, kind, rid)
                else:
                    self.tally.record("h2c:" + (kind or "echo"), "conn-error:" + e.kind,
                                      fail="connection error the client did not cause",
                                      detail="%s id %s: %s" % (host, rid, e))
            if not plan:
                self.tally.record("h2c", "conn-error:" + e.kind,
                                  fail="connection error the client did not cause",
                                  detail=str(e))
        finally:
            c.close()
