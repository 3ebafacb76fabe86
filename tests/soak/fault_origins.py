"""Origins of the soak's own, for what tests/integration/origin.py cannot do: a raw
keep-alive origin whose answers are faults (FaultOrigin), and a TCP echo server for
the tunnels (EchoServer). Both are harness.RawServer threads on 127.0.0.1:0."""

import time

import harness as H
from soak_client import rst_close
from soak_config import RESPONSE_HEADERS, pattern


class _PrunedServer(H.RawServer):
    """harness.RawServer that forgets each connection when it is done (RawServer keeps
    them all, which a 10-minute run would turn into a slow leak of our own).
    Subclasses implement _serve_conn(sock)."""

    def _serve(self, s, idx):
        try:
            self._serve_conn(s)
        except OSError:
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass
            with self.lock:
                try:
                    self._conns.remove(s)
                except ValueError:
                    pass


class FaultOrigin(_PrunedServer):
    """Keep-alive HTTP/1.1 origin whose answer is chosen by the path:
      /ok            200, 2 bytes
      /reset_mid     200 with Content-Length 100000, 10000 bytes, then RST
      /reset_before  RST right after reading the request (no byte sent)
      /close         FIN right after reading the request (no byte sent)
      /garbage       bytes that are not HTTP, then wait for the proxy to close
      /hang          never answers; waits (at most 8 s) for the proxy to give up"""

    def __init__(self):
        _PrunedServer.__init__(self, "soak-fault-origin")

    def _serve_conn(self, s):
        s.settimeout(10)
        buf = b""
        while True:
            got = H.recv_head(s, buf)
            if got is None:
                return
            head, buf = got
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            path = parts[1].split("?")[0] if len(parts) > 1 else "/"
            if path == "/reset_mid":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                          b"Content-Length: 100000\r\n\r\n" + pattern(10000))
                time.sleep(0.02)
                rst_close(s)
                return
            if path == "/reset_before":
                rst_close(s)
                return
            if path == "/close":
                return
            if path == "/garbage":
                s.sendall(b"SSH-2.0-OpenSSH_9.2 \x00\x01\x02 certainly not HTTP\r\n\r\n")
                self._wait_peer_close(s, 4.0)
                return
            if path == "/hang":
                self._wait_peer_close(s, RESPONSE_HEADERS + 6.0)
                return
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                      b"Content-Length: 2\r\n\r\nok")

    @staticmethod
    def _wait_peer_close(s, limit):
        s.settimeout(limit)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass


class EchoServer(_PrunedServer):
    """TCP echo: what arrives goes back; EOF from the peer closes the connection."""

    def __init__(self):
        _PrunedServer.__init__(self, "soak-echo")

    def _serve_conn(self, s):
        s.settimeout(20)
        while True:
            d = s.recv(65536)
            if not d:
                return
            s.sendall(d)
