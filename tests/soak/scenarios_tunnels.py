"""CONNECT scenarios: tunnels to the echo server, closed at random (before the 200,
after it, after some echoed traffic, by half-close, or left idle until the proxy closes
them), and CONNECT to a port the proxy must refuse (403)."""

import os
import socket
import time

from scenario_base import ScenarioBase
from soak_client import Client, ConnError
from soak_config import HEALTHY, IDLE


class TunnelScenarios(ScenarioBase):
    def scn_connect(self, rng):
        host = rng.choice(HEALTHY)
        variant = rng.choice(["abort_before_reply", "abort_after_reply", "echo_close",
                              "echo_close", "echo_halfclose", "echo_idle"])
        scn = "connect:" + variant
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                    % (host, self.echo.port, host, self.echo.port)).encode())
            if variant == "abort_before_reply":
                time.sleep(rng.uniform(0, 0.05))
                return self._aborted(scn, c, rng)
            resp = c.read_head()
            if resp.status != 200:
                c.read_body(resp, "GET")
                self.finish_close(scn, c, resp, host)
                return
            if c.buf:
                self.tally.record(scn, "200", fail="bytes after the CONNECT 200 before the"
                                  " origin said anything", detail=repr(c.buf[:60]))
                return
            if variant == "abort_after_reply":
                return self._aborted(scn, c, rng)
            for _ in range(rng.randint(1, 5)):
                data = os.urandom(rng.choice([1, 100, 4096, 65536, 200000]))
                c.send(data)
                back = c.read_exact(len(data))
                if back != data:
                    self.tally.record(scn, "200", fail="tunnel echo differs",
                                      detail="%d bytes" % len(data))
                    return
            if variant == "echo_close":
                if rng.random() < 0.5:
                    c.send(os.urandom(rng.choice([10, 50000])))  # in flight as we close
                return self._aborted(scn, c, rng, "closed-by-client")
            if variant == "echo_halfclose":
                c.sock.shutdown(socket.SHUT_WR)
                after = c.wait_eof(5.0)
                if after in ("eof", "reset"):
                    self.tally.record(scn, "half-closed, then closed")
                else:
                    self.tally.record(scn, "half-close-" + after,
                                      fail="tunnel did not close after the client's"
                                      " half-close and the origin's close", detail=after)
                return
            # echo_idle: no traffic; the proxy closes after timeouts.idle
            t0 = time.monotonic()
            after = c.wait_eof(IDLE + 3.0)
            took = time.monotonic() - t0
            if after in ("eof", "reset") and took >= IDLE - 0.3:
                self.tally.record(scn, "idle-closed-by-proxy")
            elif after in ("eof", "reset"):
                self.tally.record(scn, "closed-early", warn="tunnel closed %.2f s after the"
                                  " last traffic (timeouts.idle %gs)" % (took, IDLE))
            else:
                self.tally.record(scn, "idle-not-closed", fail="idle tunnel still open %.1f s"
                                  " after the last traffic (timeouts.idle %gs)" % (took, IDLE),
                                  detail=after)
        except ConnError as e:
            self.conn_fail(scn, e, host)
        finally:
            c.close()

    def scn_connect_denied(self, rng):
        host = rng.choice(HEALTHY)
        c = Client(self.proxy.port, self.deadline())
        try:
            c.send(("CONNECT %s:25 HTTP/1.1\r\nHost: %s:25\r\n\r\n" % (host, host)).encode())
            resp = c.read_response("GET")
            self.finish_close("connect_denied", c, resp, host,
                              extra_ok=("403:http_request_denied",))
        except ConnError as e:
            self.conn_fail("connect_denied", e, host)
        finally:
            c.close()
