"""Scenarios against the desync origin (desync_origin.py); every request carries an id
and every answer is checked to be its own (tagging.judge_desync):

  desync       a keep-alive connection to a shared desync host (d00-d03) with 1-4
               requests of random kinds: plain tagged answers mixed with HEAD/204/304
               answers followed by stray bytes in the same write, unsolicited 101s and
               150s with bytes behind them, resets and interim 100/103 answers
  desync_late  on the client thread's own host (dlNN), one HEAD/204/304 whose body or
               stray response the origin sends 0.05-0.2 s after the answer; once it went
               out (desync_origin.settle_late), 1-3 tagged requests on the same client
               connection (so the same proxy worker and origin pool): none of them may
               get the stray bytes, and none may reach the origin on that connection."""

import threading
import time

from scenario_base import ScenarioBase
from soak_client import Client, ConnError, req_head
from soak_config import (DESYNC_SHARED, LATE_MARGIN, LATE_WAIT, MAX_WAIT, RESPONSE_HEADERS,
                         late_host)
from tagging import KINDS, LATE_KINDS, judge_desync, new_id, pick_shared_kind


def desync_head(method, host, port, kind, rid, conn):
    return req_head(method, host, port, "/dz/%s?id=%s" % (kind, rid), [("X-Req-Id", rid)],
                    conn=conn)


def read_answer(c, method):
    """The answer to one request and the interim statuses before it: 100 and 103 are
    skipped; a 101 or another 1xx is returned as it is (its body not read)."""
    interim = []
    while True:
        resp = c.read_head()
        if resp.status in (100, 103):
            interim.append(resp.status)
            continue
        if resp.status >= 200:
            c.read_body(resp, method)
        return resp, interim


class DesyncScenarios(ScenarioBase):
    def _exchange(self, c, scn, host, kind, last, prefix="d"):
        """One tagged request of `kind` on c, judged and recorded. Returns (may the
        connection carry another request, the request id, the response)."""
        method = KINDS[kind][0]
        rid = new_id(prefix)
        c.send(desync_head(method, host, self.desync.port, kind, rid,
                           "close" if last else "keep-alive"))
        resp, interim = read_answer(c, method)
        fail, warn, detail = judge_desync(kind, rid, resp.status, resp.hd.get("x-answer-to"),
                                          resp.body, resp.proxy_error, interim)
        if resp.status < 200:   # judge_desync failed it; the rest of the stream is unknown
            self.tally.record(scn, resp.label, fail=fail, detail="%s %s" % (host, detail))
            return False, rid, resp
        closing = last or "close" in resp.hd.get("connection", "").lower()
        failed = self.record_tagged(scn, resp.label, fail, warn, "%s %s" % (host, detail), c,
                                    closing, method, matched=not resp.proxy_error)
        return not closing and not failed, rid, resp

    def _room(self, c):
        return c.remaining() >= MAX_WAIT + RESPONSE_HEADERS + 5 and not self.stop.is_set()

    def scn_desync(self, rng):
        host = rng.choice(DESYNC_SHARED)
        n = rng.randint(1, 4)
        c = Client(self.proxy.port, self.deadline())
        try:
            for i in range(n):
                kind = pick_shared_kind(rng)
                last = i == n - 1 or not self._room(c)
                more, _, _ = self._exchange(c, "desync:" + kind, host, kind, last)
                if not more:
                    return
        except ConnError as e:
            self.conn_fail("desync", e, host)
        finally:
            c.close()

    def scn_desync_late(self, rng):
        host = late_host(threading.current_thread().name)
        kind = rng.choice(LATE_KINDS)
        method = KINDS[kind][0]
        rid = new_id("l")
        pending = True    # the origin may still send this request's late bytes
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(desync_head(method, host, self.desync.port, kind, rid, "keep-alive"))
            resp, interim = read_answer(c, method)
            # the late bytes go out while the origin connection sits in the proxy's pool;
            # no request of this host is sent before they did (or were called off)
            state = self.desync.settle_late(rid, LATE_WAIT)
            pending = False
            self.tally.count("late stray bytes: %s" % state)
            if state == "sent":
                time.sleep(LATE_MARGIN)
            fail, warn, detail = judge_desync(kind, rid, resp.status, resp.hd.get("x-answer-to"),
                                              resp.body, resp.proxy_error, interim)
            scn = "desync_late:" + kind
            if resp.status < 200:
                self.tally.record(scn, resp.label, fail=fail, detail="%s %s" % (host, detail))
                return
            closing = "close" in resp.hd.get("connection", "").lower()
            if self.record_tagged(scn, resp.label, fail, warn, "%s %s" % (host, detail), c,
                                  closing, method, matched=not resp.proxy_error) or closing:
                return
            n = rng.randint(1, 3)
            for i in range(n):
                last = i == n - 1 or not self._room(c)
                more, _, _ = self._exchange(c, "desync_late:after", host,
                                            rng.choice(["ok", "ok", "ok_head"]), last, "a")
                if not more:
                    return
        except ConnError as e:
            self.conn_fail("desync_late", e, host)
        finally:
            if pending:
                self.desync.settle_late(rid, 0.0)   # never leave late bytes to go out later
            c.close()
