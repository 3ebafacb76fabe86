#!/usr/bin/python3
"""TLS interception when something goes wrong, and a throttled origin:
- a client that sends garbage instead of a ClientHello is closed at once; one that stalls
  mid-handshake is closed at timeouts.idle;
- an origin that resets the connection during the TLS handshake gets the client a 502
  with Proxy-Status error=tls_protocol_error;
- a client that sends close_notify and FIN while its request is parked leaves the queue,
  and the request never reaches the origin;
- a 429 with Retry-After from a TLS origin, seen on one intercepted connection, pauses
  the host for requests on every other intercepted connection."""
import os
import socket
import ssl
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


HOST = "tls.test"


def closed_within(s, seconds):
    """Seconds until the proxy closed `s` (reading and dropping whatever it sends), or None."""
    start = time.monotonic()
    s.settimeout(seconds)
    try:
        while True:
            if not s.recv(4096):
                return time.monotonic() - start
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - start
    except socket.timeout:
        return None


def resetting_server():
    """Accepts TCP connections and resets each (SO_LINGER 0) once the ClientHello's first
    bytes arrived: the handshake fails in the middle. Returns (port, stop)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.settimeout(0.2)
    done = threading.Event()

    def serve():
        while not done.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            c.settimeout(5)
            try:
                c.recv(1)  # the ClientHello has started
            except OSError:
                pass
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
        ls.close()

    threading.Thread(target=serve, daemon=True).start()
    return ls.getsockname()[1], done.set


def test(t):
    ca_cert, ca_key = t.gen_ca()
    origin = t.origin(tls=True)
    origin_cert, _ = t.cert()
    reset_port, stop_reset = resetting_server()
    cfg = H.base_config(tls_port=origin.port, concurrency=2, rate=1000, burst=1000,
                        timeouts={"idle": "2s"})
    cfg["security"]["connect_ports"].append(reset_port)
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    proxy = t.proxy(cfg)

    # garbage instead of a ClientHello
    s = H.connect_tunnel(proxy, HOST, origin.port)
    s.sendall(b"GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n")
    took = closed_within(s, 5)
    s.close()
    H.check(took is not None and took < 1.0, "garbage instead of a ClientHello: closed after %r s" % took)
    H.log("garbage instead of a ClientHello: closed after %.3f s" % took)

    # a CONNECT inside the intercepted TLS opens no tunnel there: the entry rules refuse it
    # (400, the connection closed), and nothing reaches the origin
    origin.reset()
    ts = ssl.create_default_context(cafile=ca_cert).wrap_socket(H.connect_tunnel(proxy, HOST, origin.port),
                                                                 server_hostname=HOST)
    ts.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (HOST, origin.port, HOST, origin.port)).encode())
    ts.settimeout(5)
    try:
        answer = H.recv_to_close(ts)
    except (socket.timeout, ssl.SSLError, OSError) as e:
        answer = b"(no answer before the connection broke: %s)" % str(e).encode()
    ts.close()
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    H.check(head.startswith("HTTP/1.1 400") and "no tunnel" in head and "Connection: close" in head,
            "CONNECT inside intercepted TLS: %r" % head)
    H.check(not origin.host(HOST)["requests"], "CONNECT inside intercepted TLS reached the origin")
    H.log("CONNECT inside intercepted TLS: %s" % head.splitlines()[0])

    # a stall in the middle of the handshake: the first bytes of a ClientHello, then nothing
    s = H.connect_tunnel(proxy, HOST, origin.port)
    s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc]))
    took = closed_within(s, 6)
    s.close()
    H.check(took is not None and 1.5 < took < 4.0, "a stalled handshake: closed after %r s (timeouts.idle 2s)" % took)
    H.log("a handshake stalled mid-ClientHello: closed after %.2f s (timeouts.idle 2s)" % took)

    # an origin that resets during the handshake
    sess = H.https_session(proxy, ca_cert)
    resp = sess.get("https://%s:%d/x" % (HOST, reset_port), timeout=10)
    sess.close()
    stop_reset()
    status = resp.headers.get("Proxy-Status", "")
    H.check(resp.status_code == 502 and "error=tls_protocol_error" in status,
            "origin reset during the handshake: %d %r" % (resp.status_code, status))
    H.log("origin reset during the handshake: %d %s" % (resp.status_code, status))

    # a client that leaves while its request is parked, with a TLS close_notify (bytes
    # the proxy cannot peek past) and then a FIN: the request leaves the queue
    origin.reset()
    base = "https://%s:%d" % (HOST, origin.port)
    holders = [threading.Thread(target=lambda i=i: H.https_session(proxy, ca_cert).get(
        base + "/hold?delay=5&i=%d" % i, timeout=30)) for i in range(2)]
    for th in holders:
        th.start()
    H.check(H.wait_until(lambda: origin.host(HOST)["in_flight"] == 2, 5), "the 2 slow requests did not start")
    ts = ssl.create_default_context(cafile=ca_cert).wrap_socket(H.connect_tunnel(proxy, HOST, origin.port),
                                                                 server_hostname=HOST)
    ts.sendall(("GET /abandoned HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (HOST, origin.port)).encode())
    H.check(H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_host_waiting", host=HOST, default=0) == 1,
                         2), "the third request was not parked")
    ts.settimeout(0.2)
    try:
        ts.unwrap()  # sends close_notify; the proxy sends none back
    except (socket.timeout, ssl.SSLError, OSError):
        pass
    ts.close()
    left = time.monotonic()
    gone = H.wait_until(lambda: H.mget(proxy.metrics(), "politeproxy_host_waiting", host=HOST, default=0) == 0, 2)
    H.check(gone, "a client that sent close_notify and FIN stayed parked")
    H.log("a parked client inside TLS left (close_notify, FIN): out of the queue after %.2f s"
          % (time.monotonic() - left))
    for th in holders:
        th.join(30)
    time.sleep(0.3)
    H.check(not [r for r in origin.host(HOST)["requests"] if r["target"].startswith("/abandoned")],
            "the abandoned request reached the origin")

    # a 429 on one intercepted connection pauses the host on another
    a, b = H.https_session(proxy, ca_cert), H.https_session(proxy, ca_cert)
    H.check(b.get(base + "/warm", timeout=10).status_code == 200, "warm-up request failed")
    origin.reset()
    r = a.get(base + "/throttle?status=429&retry_after=2", timeout=10)
    H.check(r.status_code == 429, "the origin's 429 did not pass through: %d" % r.status_code)
    start = time.monotonic()
    r = b.get(base + "/after", timeout=20)
    waited = time.monotonic() - start
    a.close()
    b.close()
    H.check(r.status_code == 200 and waited >= 1.5, "a request on another connection after the 429: %d after "
            "%.2f s (Retry-After 2)" % (r.status_code, waited))
    arrivals = origin.host(HOST)["arrivals"]
    H.check(len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 1.5, "origin arrivals %r" % arrivals)
    H.log("429 with Retry-After 2 on one connection: the next request on another waited %.2f s" % waited)

    H.check(H.wait_until(lambda: H.msum(proxy.metrics(), "politeproxy_host_in_flight") == 0 and
                         H.msum(proxy.metrics(), "politeproxy_host_waiting") == 0, 5),
            "in_flight/waiting did not return to 0")


if __name__ == "__main__":
    H.main(test, timeout=60)
