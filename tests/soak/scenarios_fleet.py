"""Scenarios through the fleet proxies (fleet.py), every request with an id that
origin.py's JSON echo must name (tagging.judge_echo):

  fleet  plain HTTP/1.1: a keep-alive connection to fleet-a or fleet-b with 1-3 GETs to
         the fleet hosts (f00-f05), now and then slow
  tls    intercepted TLS: CONNECT tNN.test to the TLS origin, a TLS handshake that must
         trust the proxy's CA, then 1-4 GETs (origin-form) inside it, the last with
         Connection: close, after which the proxy must close the TLS connection

While the store is down (and OUTAGE_SLACK after) fleet-a (local_share) must still
answer from the origin and fleet-b (fail_closed) may answer its own 503; what each got
during the outage is counted for the summary (fleet.Fleet.judge_proxy_answer)."""

import ssl
import time

from scenario_base import ScenarioBase
from soak_client import Client, ConnError, req_head
from soak_config import FLEET_HOSTS, MAX_WAIT, RESPONSE_HEADERS, TLS_HOSTS
from tagging import judge_echo, new_id


def origin_form(host, port, path, rid, conn):
    return ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nX-Req-Id: %s\r\nConnection: %s\r\n\r\n"
            % (path, host, port, rid, conn)).encode()


class FleetScenarios(ScenarioBase):
    def _fleet_answer(self, scn, edge, host, rid, resp, t0, c, closing):
        """Judges and records one answer through a fleet proxy; returns the failure."""
        t1 = time.monotonic()
        fail, detail = judge_echo(rid, resp.status, resp.body, resp.proxy_error)
        warn = None
        if not fail and resp.proxy_error:
            fail, warn, detail = self.fleet.judge_proxy_answer(edge, resp, t0, t1)
        elif not fail and resp.status != 200:
            warn, detail = "unexpected status through the fleet", "%s %s" % (edge.name, host)
        note = self.fleet.outage_note(edge, resp.label, t0, t1)
        if note:
            self.tally.count(note)
        return self.record_tagged(scn, resp.label, fail, warn, "%s %s %s" % (
            edge.name, host, detail), c, closing, "GET", matched=not resp.proxy_error)

    def _last(self, c, i, n):
        return (i == n - 1 or self.stop.is_set()
                or c.remaining() < MAX_WAIT + RESPONSE_HEADERS + 5)

    def _tagged_requests(self, rng, c, scn, edge, host, n, kind, delay_share, max_delay, head):
        """n tagged GETs of /KIND on connection c, each judged by _fleet_answer;
        head(path, rid, conn) is the request's bytes."""
        for i in range(n):
            last = self._last(c, i, n)
            rid = new_id(kind[0])
            path = "/%s?id=%s" % (kind, rid)
            if rng.random() < delay_share:
                path += "&delay=%.2f" % rng.uniform(0.05, max_delay)
            t0 = time.monotonic()
            c.send(head(path, rid, "close" if last else "keep-alive"))
            resp = c.read_response("GET")
            closing = last or "close" in resp.hd.get("connection", "").lower()
            if self._fleet_answer(scn, edge, host, rid, resp, t0, c, closing) or closing:
                return

    def scn_fleet(self, rng):
        edge = rng.choice(self.fleet.edges)
        host = rng.choice(FLEET_HOSTS)
        scn = "fleet:" + edge.name
        n = rng.randint(1, 3)
        c = Client(edge.proxy.port, self.deadline())
        try:
            self._tagged_requests(rng, c, scn, edge, host, n, "fleet", 0.3, 0.6, lambda path, rid, conn: req_head(
                "GET", host, self.origin.port, path, [("X-Req-Id", rid)], conn=conn))
        except ConnError as e:
            self.conn_fail(scn, e, "%s %s" % (edge.name, host))
        finally:
            c.close()

    def scn_tls(self, rng):
        edge = rng.choice(self.fleet.edges)
        host = rng.choice(TLS_HOSTS)
        port = self.fleet.tls_origin.port
        scn = "tls:" + edge.name
        c = Client(edge.proxy.port, self.deadline(), what="tls")
        try:
            t0 = time.monotonic()
            c.send(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                    % (host, port, host, port)).encode())
            resp = c.read_head()
            if resp.status != 200:
                c.read_body(resp, "GET")
                self._fleet_answer(scn + ":connect", edge, host, "-", resp, t0, c, True)
                return
            if c.buf:
                self.tally.record(scn, "200", fail="bytes after the CONNECT 200 before the"
                                  " TLS handshake", detail=repr(c.buf[:60]))
                return
            c.sock.settimeout(max(0.2, c.remaining()))
            try:
                c.sock = self.fleet.tls_ctx.wrap_socket(c.sock, server_hostname=host)
            except (ssl.SSLError, OSError) as e:
                self.tally.record(scn, "tls-handshake-failed", fail="TLS handshake with the"
                                  " intercepting proxy failed", detail="%s %s: %s" % (
                                      edge.name, host, e))
                return
            self._tagged_requests(rng, c, scn, edge, host, rng.randint(1, 4), "tls", 0.2, 0.4,
                                  lambda path, rid, conn: origin_form(host, port, path, rid, conn))
        except ConnError as e:
            self.conn_fail(scn, e, "%s %s" % (edge.name, host))
        finally:
            c.close()
