"""Scenarios of clients that give up: after the request head (or part of it), in the
middle of an upload, while their request is parked or in flight, in the middle of a
big response. Each records the client's own ending, not a response."""

import os
import time

from scenario_base import ScenarioBase
from soak_client import Client, ConnError, chunked, req_head
from soak_config import pattern


class AbortScenarios(ScenarioBase):
    def scn_abort_header(self, rng):
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            v = rng.random()
            if v < 0.4:   # POST header sent, then nothing: the body never comes
                c.send(req_head("POST", host, self.origin.port, "/abort_header",
                                [("Content-Length", "100000")]))
                time.sleep(rng.uniform(0, 0.5))
            elif v < 0.7:  # part of the header section only
                h = req_head("GET", host, self.origin.port, "/abort_partial?size=10")
                c.send(h[:rng.randint(1, len(h) - 2)])
                time.sleep(rng.uniform(0, 0.3))
            else:          # a complete GET, closed at once
                c.send(req_head("GET", host, self.origin.port, "/abort_now?delay=0.3"))
                time.sleep(rng.uniform(0, 0.05))
            self._aborted("abort_header", c, rng)
        except ConnError as e:
            c.close()
            self.conn_fail("abort_header", e, host)

    def scn_abort_body(self, rng):
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            n = rng.choice([100000, 500000, 1000000])
            body = os.urandom(n)
            if rng.random() < 0.5:
                c.send(req_head("POST", host, self.origin.port, "/abort_body",
                                [("Content-Length", str(n))]))
                wire = body
            else:
                c.send(req_head("PUT", host, self.origin.port, "/abort_body_chunked",
                                [("Transfer-Encoding", "chunked")]))
                wire = chunked(body, rng)
            cut = rng.randint(1, len(wire) - 10)
            step = max(1, cut // rng.randint(1, 4))
            for i in range(0, cut, step):
                c.send(wire[i:min(cut, i + step)])
                time.sleep(rng.uniform(0, 0.1))
            self._aborted("abort_body", c, rng)
        except ConnError as e:
            c.close()
            if e.kind in ("send", "timeout"):
                # the proxy may stop reading a parked upload (its buffers are full) or
                # answer 503 and close; either way the client is giving up anyway
                self.tally.record("abort_body", "aborted(send blocked/failed)")
            else:
                self.conn_fail("abort_body", e, host)

    def scn_abort_parked(self, rng):
        # a slow request, given up after a random time: parked, in flight or done
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port,
                            "/abort_parked?delay=%.2f" % rng.uniform(0.5, 1.5)))
            time.sleep(rng.uniform(0.05, 2.5))
            self._aborted("abort_parked", c, rng)
        except ConnError as e:
            c.close()
            self.conn_fail("abort_parked", e, host)

    def scn_abort_response(self, rng):
        host = self.pick_host(rng)
        size = rng.choice([1000000, 3000000])
        want = rng.choice([0, 1, 16384, 200000, 900000])
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/abort_response?size=%d" % size))
            resp = c.read_head()
            if resp.status != 200 or resp.proxy_error:
                c.read_body(resp, "GET")
                self.finish_close("abort_response", c, resp, host)
                return
            c.read_body(resp, "GET", limit=want)
            if len(resp.body) >= size:
                self.finish_close("abort_response", c, resp, host, size=size)
                return
            if resp.body != pattern(len(resp.body)):
                self.tally.record("abort_response", "aborted", fail="corrupt body",
                                  detail="first %d bytes differ" % len(resp.body))
                c.close()
                return
            self._aborted("abort_response", c, rng)
        except ConnError as e:
            c.close()
            self.conn_fail("abort_response", e, host)
