"""Scenarios of clients that see their requests through: GETs of every size, slow
answers, a slow reader, HEAD, uploads (Content-Length, chunked, Expect: 100-continue),
keep-alive sequences, 429/503 answers, the fault origin's faults, throw-away hosts."""

import email.utils
import os
import socket
import time

from scenario_base import ScenarioBase, stray_kind
from soak_client import Client, ConnError, chunked, req_head
from soak_config import (FAULTY, HEALTHY, IDLE, MAX_WAIT, N_EPHEMERAL, RESPONSE_HEADERS,
                         THROTTLED)


class HttpScenarios(ScenarioBase):
    def scn_get(self, rng, scn="get", delay=None):
        host = self.pick_host(rng)
        size = rng.choice([0, 10, 1000, 16384, 65536, 300000])
        q = "size=%d" % size
        if delay:
            q += "&delay=%.2f" % delay
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/%s?%s" % (scn, q)))
            resp = c.read_response("GET")
            self.finish_close(scn, c, resp, host, size=size)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_slow(self, rng):
        self.scn_get(rng, "slow", delay=rng.uniform(0.2, 1.0))

    def scn_slow_reader(self, rng):
        # a client that reads a big body slowly (pauses well under timeouts.idle): the
        # proxy must apply backpressure and deliver every byte
        host = rng.choice(HEALTHY)
        size = rng.choice([500000, 1500000])
        c = Client(self.proxy.port, self.deadline())
        try:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            c.send(req_head("GET", host, self.origin.port, "/slow_reader?size=%d" % size))
            resp = c.read_head()
            if resp.status == 200 and not resp.proxy_error:
                n = int(resp.hd.get("content-length", "-1"))
                while len(resp.body) + len(c.buf) < n:
                    resp.body += c.buf
                    c.buf = b""
                    time.sleep(rng.uniform(0.0, 0.05))
                    if not c._recv():
                        raise ConnError("truncated", "EOF after %d of %d body bytes"
                                        % (len(resp.body), n), resp=resp)
            c.read_body(resp, "GET")
            self.finish_close("slow_reader", c, resp, host, size=size)
        except ConnError as e:
            self.conn_fail("slow_reader", e, host)
        finally:
            c.close()

    def scn_head(self, rng):
        host = self.pick_host(rng)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("HEAD", host, self.origin.port, "/head?size=1000"))
            resp = c.read_response("HEAD")
            if resp.status == 200 and not resp.proxy_error and \
                    resp.hd.get("content-length") != "1000":
                self.tally.record("head", resp.label, warn="HEAD lost its Content-Length",
                                  detail=repr(resp.headers))
                return
            self.finish_close("head", c, resp, host, method="HEAD")
        except ConnError as e:
            self.conn_fail("head", e, host)
        finally:
            c.close()

    def _upload(self, rng, scn, method, use_chunked, expect=False):
        host = self.pick_host(rng)
        body = os.urandom(rng.choice([0, 1, 100, 5000, 65536, 200000]))
        hdrs = [("Content-Type", "application/octet-stream")]
        if use_chunked:
            hdrs.append(("Transfer-Encoding", "chunked"))
            wire = chunked(body, rng)
        else:
            hdrs.append(("Content-Length", str(len(body))))
            wire = body
        if expect:
            hdrs.append(("Expect", "100-continue"))
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head(method, host, self.origin.port, "/%s" % scn, hdrs))
            if expect:
                resp = c.read_response(method)
                if resp.status == 100:
                    c.send(wire)
                    resp, _ = c.read_final(method)
                # else a final answer without 100: the body is not sent (RFC 9110 10.1.1)
                self.finish_close(scn, c, resp, host, sent=body if resp.status == 200 else None)
                return
            # send in a few pieces, now and then with a pause between them
            pieces = rng.choice([1, 1, 2, 3])
            step = max(1, len(wire) // pieces)
            send_err = None
            for i in range(0, len(wire), step):
                try:
                    c.send(wire[i:i + step])
                except ConnError as e:
                    send_err = e  # the proxy may have answered early; read it below
                    break
                if pieces > 1 and rng.random() < 0.3:
                    time.sleep(rng.uniform(0.01, 0.2))
            try:
                resp, _ = c.read_final(method)
            except ConnError as e:
                if send_err is not None:
                    e = ConnError(e.kind, "%s (sending the body failed first: %s)"
                                  % (e.detail, send_err.detail))
                raise e
            self.finish_close(scn, c, resp, host, sent=body)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_post_cl(self, rng):
        self._upload(rng, "post_cl", "POST", False)

    def scn_put_chunked(self, rng):
        self._upload(rng, "put_chunked", "PUT", True)

    def scn_expect100(self, rng):
        self._upload(rng, "expect100", "POST", rng.random() < 0.5, expect=True)

    def scn_keepalive(self, rng):
        host = self.pick_host(rng)
        n = rng.randint(2, 6)
        c = Client(self.proxy.port, self.deadline())
        try:
            for i in range(n):
                if i > 0 and c.remaining() < MAX_WAIT + RESPONSE_HEADERS + 5:
                    return  # our own time budget: we close the idle connection
                last = i == n - 1 or self.stop.is_set()
                kind = rng.choice(["get", "get", "head", "post"])
                conn = "close" if last else "keep-alive"
                size = sent = None
                if kind == "get":
                    size = rng.choice([0, 100, 5000, 70000])
                    c.send(req_head("GET", host, self.origin.port,
                                    "/ka%d?size=%d" % (i, size), conn=conn))
                    method = "GET"
                elif kind == "head":
                    c.send(req_head("HEAD", host, self.origin.port, "/ka%d?size=10" % i,
                                    conn=conn))
                    method = "HEAD"
                else:
                    sent = os.urandom(rng.choice([0, 10, 3000, 40000]))
                    if rng.random() < 0.5:
                        c.send(req_head("POST", host, self.origin.port, "/ka%d" % i,
                                        [("Content-Length", str(len(sent)))], conn=conn) + sent)
                    else:
                        c.send(req_head("POST", host, self.origin.port, "/ka%d" % i,
                                        [("Transfer-Encoding", "chunked")], conn=conn)
                               + chunked(sent, rng))
                    method = "POST"
                resp, _ = c.read_final(method)
                closing = last or "close" in resp.hd.get("connection", "").lower()
                if closing:
                    self.finish_close("keepalive", c, resp, host, size=size, sent=sent,
                                      method=method)
                    return
                if c.buf:
                    # nothing was pipelined: these bytes belong to no request, and the
                    # next response would be read from them
                    self.tally.record("keepalive", resp.label, fail=stray_kind(method),
                                      detail="%s %r" % (host, c.buf[:80]))
                    return
                bad = self.check_body(resp, size=size, sent=sent)
                warn = None if self.expected_ok(host, resp) else "unexpected status for keepalive"
                self.tally.record("keepalive", resp.label,
                                  fail="corrupt body" if bad else None, warn=warn,
                                  detail=bad or host)
                gap = rng.random()
                if gap < 0.07:
                    # idle past timeouts.idle: the proxy must close the connection
                    time.sleep(IDLE + 1.5)
                    after = c.wait_eof(2.0)
                    if after in ("eof", "reset"):
                        self.tally.record("keepalive", "idle-closed-by-proxy")
                    else:
                        self.tally.record("keepalive", "idle-not-closed",
                                          warn="kept-alive client connection still open %.1f s"
                                          " after its last response (timeouts.idle %gs)"
                                          % (IDLE + 3.5, IDLE), detail=after)
                    return
                if gap < 0.4:
                    time.sleep(rng.uniform(0.01, 1.0))
        except ConnError as e:
            self.conn_fail("keepalive", e, host)
        finally:
            c.close()

    def scn_throttle(self, rng):
        host = rng.choice(THROTTLED)
        status = rng.choice([429, 503])
        ra = rng.choice([None, "1", "0", "date"])
        q = "status=%d" % status
        if ra == "date":
            q += "&retry_after=" + email.utils.formatdate(time.time() + 1, usegmt=True
                                                          ).replace(" ", "%20").replace(",", "%2C")
        elif ra is not None:
            q += "&retry_after=" + ra
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/throttle?" + q))
            resp = c.read_response("GET")
            self.finish_close("throttle", c, resp, host, extra_ok=(str(status),))
        except ConnError as e:
            self.conn_fail("throttle", e, host)
        finally:
            c.close()

    def scn_fault(self, rng):
        host = rng.choice(FAULTY)
        path = rng.choice(["/ok", "/reset_mid", "/reset_before", "/close", "/garbage",
                           "/hang"])
        scn = "fault" + path.replace("/", ":")
        expect = {"/ok": ("200",),
                  "/reset_mid": ("200",),
                  "/reset_before": ("502:connection_terminated", "502:connection_refused"),
                  "/close": ("502:connection_terminated",),
                  "/garbage": ("502:http_protocol_error",),
                  "/hang": ("504:http_response_timeout",)}[path]
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.faults.port, path))
            try:
                resp = c.read_response("GET")
            except ConnError as e:
                if path == "/reset_mid" and e.kind == "truncated" and e.resp is not None \
                        and e.resp.status == 200 and e.got < 100000:
                    # the header went out before the origin's reset: a truncated body
                    # and a closed connection is all a proxy can do
                    self.tally.record(scn, "200-truncated(origin reset)")
                    return
                raise
            if path == "/reset_mid" and resp.label == "200":
                self.tally.record(scn, resp.label, fail="whole body from an origin that"
                                  " sent 10000 of 100000 bytes", detail=host)
                return
            self.finish_close(scn, c, resp, host, extra_ok=expect)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_ephemeral(self, rng):
        host = "e%03d.test" % rng.randrange(N_EPHEMERAL)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(req_head("GET", host, self.origin.port, "/eph?size=100"))
            resp = c.read_response("GET")
            self.finish_close("ephemeral", c, resp, HEALTHY[0], size=100)
        except ConnError as e:
            self.conn_fail("ephemeral", e, host)
        finally:
            c.close()
