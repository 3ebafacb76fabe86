#!/usr/bin/python3
"""A CONNECT tunnel holds one slot of its host while open (host_in_flight 1, and a
second tunnel to the same host at concurrency 1 waits), forwards a client's half-close
without cutting the origin's response, and closes after timeouts.idle without traffic,
giving its slot back."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "tun.test"


def open_tunnel(proxy, origin_port, timeout=5):
    return H.connect_tunnel_raw(proxy, HOST, origin_port, timeout=timeout)


def read_to_eof(s, timeout):
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data, True
            data += chunk
    except socket.timeout:
        return data, False


def in_flight(proxy):
    return H.mget(proxy.metrics(), "politeproxy_host_in_flight", host=HOST)


def test(t):
    origin = t.origin()
    cfg = H.base_config(concurrency=1, timeouts={"idle": "1s"})
    cfg["security"]["connect_ports"] = [origin.port]
    proxy = t.proxy(cfg)

    # 1. Half-close: the client sends its request and shuts down its side at once; the
    # whole response (200 KB) must still come back through the tunnel.
    s, head = open_tunnel(proxy, origin.port)
    H.check(head.startswith(b"HTTP/1.1 200"), "CONNECT answered %r" % head[:80])
    H.check(in_flight(proxy) == 1, "an open tunnel must count as 1 in flight, saw %r" % in_flight(proxy))
    s.sendall(("GET /half?size=200000 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % HOST).encode())
    s.shutdown(socket.SHUT_WR)
    data, eof = read_to_eof(s, 5)
    s.close()
    H.check(eof and data.startswith(b"HTTP/1.") and len(data) > 200000,
            "after the client's half-close the response was cut: %d bytes, eof=%s" % (len(data), eof))
    H.wait_until(lambda: in_flight(proxy) in (None, 0), 3)
    H.check(in_flight(proxy) in (None, 0), "closed tunnel still counted: %r" % in_flight(proxy))

    # 2. Idle: a silent tunnel is closed after timeouts.idle (1 s); while it is open a
    # second tunnel to the same host (concurrency 1) is parked, then gets the slot.
    s1, head1 = open_tunnel(proxy, origin.port)
    H.check(head1.startswith(b"HTTP/1.1 200"), "CONNECT answered %r" % head1[:80])
    t0 = time.monotonic()
    s2 = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    s2.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (HOST, origin.port)).encode())
    H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_host_waiting", host=HOST) == 1, 2)
    H.check(H.mget(proxy.metrics(), "politeproxy_host_waiting", host=HOST) == 1,
            "a second tunnel at concurrency 1 should be parked")
    data, eof = read_to_eof(s1, 5)
    idle_for = time.monotonic() - t0
    H.log("idle tunnel closed after %.2fs" % idle_for)
    H.check(eof and data == b"", "the idle tunnel should close with no bytes, got %r eof=%s" % (data[:60], eof))
    H.check(0.8 <= idle_for <= 3.0, "idle tunnel closed after %.2fs, timeouts.idle is 1s" % idle_for)
    s2.settimeout(3)
    head2 = s2.recv(4096)
    H.check(head2.startswith(b"HTTP/1.1 200"), "the parked tunnel should get the freed slot, got %r" % head2[:80])
    s1.close()
    s2.close()
    H.wait_until(lambda: in_flight(proxy) in (None, 0), 4)
    H.check(in_flight(proxy) in (None, 0), "tunnels closed but in_flight is %r" % in_flight(proxy))


if __name__ == "__main__":
    H.main(test, timeout=45)
