#!/usr/bin/python3
"""HTTP/2 clients with prior knowledge (h2c) on the plain proxy port, to an HTTP/1.1
origin; the client is python3-h2 over a socket, the origin counts requests in flight as
it sees them.
1. 16 streams at once on one connection, concurrency 2: all 200, each with Proxy-Status
   queue-wait, and the origin's peak is exactly 2 (every stream took its own slot).
2. Bodies of 0, 1 and 200 000 bytes both ways, the upload with content-length and
   without (then chunked to the origin, which the origin confirms), the download with
   Content-Length and chunked: the origin's sha256 of what it got, and the client's of
   what it got, match what was sent. Trailers pass both ways (the client's after its
   body into the chunked trailer section; the origin's chunked trailer section as HEADERS).
3. A stream parked behind a slow one is reset by the client: it leaves the queue at
   once (host_waiting 0 while the first is still in flight) and never reaches the
   origin; the next stream goes as soon as the slot is free.
4. A connection closed with 50 streams parked: in_flight and waiting return to 0, and
   a new connection's request goes at once.
5. Cookies sent as separate HTTP/2 fields reach the HTTP/1.1 origin as one field.
6. h2 inside intercepted TLS (ALPN h2 after CONNECT): 16 streams at concurrency 2, the
   origin (HTTPS, HTTP/1.1) sees a peak of exactly 2; a stream whose :authority names
   another host is answered 421.
7. Abuse guards: 150 streams opened at once against the advertised 100 -> the 50 beyond
   are refused (REFUSED_STREAM), the rest answered; 300 streams opened and reset at once
   (rapid reset) -> GOAWAY ENHANCE_YOUR_CALM; each counted in
   h2_streams_refused_total{reason}, and a well-behaved client on another connection is
   served meanwhile.
8. Deadlines (timeouts.idle 1 s): a stream whose origin answers after 2 s is answered
   (the connection's idle timeout does not run while a stream is open); a connection
   with no stream open is closed after about 1 s.
9. Drain: SIGTERM with a stream in flight -> GOAWAY (NO_ERROR) at once, the stream
   answered in full, the connection closed after it, exit code 0."""
import hashlib
import json
import os
import signal
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HOST = "h2c.test"


class H2Client:
    """One HTTP/2 connection with prior knowledge; responses[stream] holds status,
    headers, body, and whether the stream ended or was reset."""

    def __init__(self, port=None, sock=None, scheme="http"):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=10)
        self.scheme = scheme
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.responses = {}
        self.pending = {}  # stream -> body bytes still to send
        self.trailers = {}  # stream -> trailer fields sent after its body
        self.terminated = None  # the GOAWAY's error code, once one came
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, authority, path, method="GET", body=None, headers=(), send=True, trailers=None):
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":scheme", self.scheme), (":authority", authority), (":path", path)]
        self.conn.send_headers(sid, fields + list(headers), end_stream=body is None)
        self.responses[sid] = {"status": None, "headers": {}, "body": b"", "ended": False, "reset": None}
        if body is not None:
            self.pending[sid] = body
            if trailers:
                self.trailers[sid] = trailers
            self._send_pending()
        if send:
            self.flush()
        return sid

    def _send_pending(self):
        for sid in list(self.pending):
            body = self.pending[sid]
            while True:
                room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
                if room <= 0 and body:
                    break
                piece, body = body[:room], body[room:]
                trailers = self.trailers.get(sid) if not body else None
                self.conn.send_data(sid, piece, end_stream=not body and not trailers)
                if trailers:
                    self.conn.send_headers(sid, trailers, end_stream=True)
                if not body:
                    break
            if body:
                self.pending[sid] = body
            else:
                del self.pending[sid]

    def reset(self, sid):
        self.conn.reset_stream(sid, error_code=8)  # CANCEL
        self.flush()

    def pump(self, until, timeout=20):
        """Reads and handles frames until until() holds; False on timeout."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            if not data:
                return until()
            for ev in self.conn.receive_data(data):
                r = self.responses.get(getattr(ev, "stream_id", None))
                if isinstance(ev, h2.events.ResponseReceived) and r is not None:
                    r["headers"] = dict(ev.headers)
                    r["status"] = int(r["headers"][":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    if r is not None:
                        r["body"] += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.TrailersReceived) and r is not None:
                    r["trailers"] = dict(ev.headers)
                elif isinstance(ev, h2.events.StreamEnded) and r is not None:
                    r["ended"] = True
                elif isinstance(ev, h2.events.StreamReset) and r is not None:
                    r["reset"] = ev.error_code
                elif isinstance(ev, h2.events.WindowUpdated):
                    self._send_pending()
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    self.terminated = ev.error_code
            self.flush()
        return True

    def done(self, sids):
        return lambda: all(self.responses[s]["ended"] or self.responses[s]["reset"] is not None for s in sids)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def authority(origin):
    return "%s:%d" % (HOST, origin.port)


def gauges(proxy):
    m = proxy.metrics()
    return (H.mget(m, "politeproxy_host_in_flight", default=0, host=HOST) or 0,
            H.mget(m, "politeproxy_host_waiting", default=0, host=HOST) or 0)


def case_streams_gated(t, proxy, origin):
    origin.reset()
    c = H2Client(proxy.port)
    try:
        sids = [c.request(authority(origin), "/slow?delay=0.2&i=%d" % i) for i in range(16)]
        H.check(c.pump(c.done(sids), 30), "not every stream ended within 30 s: %s" % c.responses)
        bad = [(s, c.responses[s]["status"]) for s in sids if c.responses[s]["status"] != 200]
        H.check(not bad, "streams without 200: %s" % bad)
        missing = [s for s in sids if "queue-wait=" not in c.responses[s]["headers"].get("proxy-status", "")]
        H.check(not missing, "streams without Proxy-Status queue-wait: %s" % missing)
    finally:
        c.close()
    st = origin.host(HOST)
    H.log("16 streams on one h2c connection: all 200; origin peak %d, count %d" % (st["peak"], st["count"]))
    H.check(st["count"] == 16, "origin received %d requests, expected 16" % st["count"])
    H.check(st["peak"] == 2, "origin's peak in flight was %d, expected exactly 2 (concurrency 2)" % st["peak"])


def case_bodies(t, proxy, origin):
    c = H2Client(proxy.port)
    try:
        for size in (0, 1, 200000):
            body = bytes((i * 31 + 7) % 256 for i in range(size))
            for with_length in (True, False):
                headers = [("content-length", str(size))] if with_length else []
                sid = c.request(authority(origin), "/upload", method="POST", body=body, headers=headers)
                H.check(c.pump(c.done([sid]), 20), "upload of %d bytes: no answer" % size)
                r = c.responses[sid]
                H.check(r["status"] == 200, "upload of %d bytes: status %s" % (size, r["status"]))
                got = json.loads(r["body"])
                H.check(got.get("length") == size and got.get("sha256") == hashlib.sha256(body).hexdigest(),
                        "upload of %d bytes (content-length %s): origin got %s" % (size, with_length, got))
                H.check(got.get("chunked") == (not with_length),
                        "upload of %d bytes (content-length %s): the origin saw chunked=%s"
                        % (size, with_length, got.get("chunked")))
            for chunked in ("0", "1"):
                sid = c.request(authority(origin), "/download?size=%d&chunked=%s" % (size, chunked))
                H.check(c.pump(c.done([sid]), 20), "download of %d bytes: no answer" % size)
                r = c.responses[sid]
                want = (b"0123456789abcdef" * (size // 16 + 1))[:size]  # what origin.py serves for size=
                H.check(r["status"] == 200 and hashlib.sha256(r["body"]).digest() == hashlib.sha256(want).digest(),
                        "download of %d bytes (chunked %s): status %s, %d bytes (equal: %s)"
                        % (size, chunked, r["status"], len(r["body"]), r["body"] == want))
                H.check(("content-length" in r["headers"]) == (chunked == "0"),
                        "download (chunked %s): content-length %r" % (chunked, r["headers"].get("content-length")))
    finally:
        c.close()
    # Trailers both ways: the client's after its body reach the origin in the chunked
    # trailer section; the origin's chunked trailer section reaches the client as HEADERS.
    c = H2Client(proxy.port)
    try:
        up = c.request(authority(origin), "/upload", method="POST", body=b"x" * 70000,
                       trailers=[("x-upload-digest", "xyz")])
        down = c.request(authority(origin), "/download?size=100&chunked=1&trailers=1")
        H.check(c.pump(c.done([up, down]), 20), "trailers: no answer")
        got = json.loads(c.responses[up]["body"])
        H.check(got.get("trailers") == [["x-upload-digest", "xyz"]] and got.get("length") == 70000,
                "request trailers at the HTTP/1.1 origin: %r" % got)
        H.check(c.responses[down].get("trailers") == {"x-checksum": "sha256=abc"},
                "response trailers from the HTTP/1.1 origin: %r" % c.responses[down].get("trailers"))
    finally:
        c.close()
    H.log("bodies of 0, 1 and 200000 bytes both ways (uploads with and without content-length, downloads with "
          "Content-Length and chunked): sha256 equal on both sides; trailers pass both ways")


def case_reset_parked(t, proxy, origin):
    origin.reset()
    c = H2Client(proxy.port)
    try:
        first = c.request(authority(origin), "/slow?delay=1.0&i=first")
        H.wait_until(lambda: origin.host(HOST)["in_flight"] == 1, 3.0, what="the first stream at the origin")
        parked = c.request(authority(origin), "/slow?delay=0&i=parked")
        H.wait_until(lambda: gauges(proxy)[1] == 1, 3.0, what="the second stream parked")
        c.reset(parked)
        t0 = time.monotonic()
        left = H.wait_until(lambda: gauges(proxy)[1] == 0, 1.0, what="host_waiting back to 0 after the reset")
        H.check(left, "host_waiting stayed %s after the parked stream was reset" % (gauges(proxy),))
        H.check(origin.host(HOST)["in_flight"] == 1, "the first stream should still be at the origin")
        H.log("reset parked stream left the queue in %.3f s" % (time.monotonic() - t0))
        H.check(c.pump(c.done([first]), 10), "the first stream did not end")
        nxt = c.request(authority(origin), "/slow?delay=0&i=next")
        t1 = time.monotonic()
        H.check(c.pump(c.done([nxt]), 5), "the next stream did not end")
        H.check(time.monotonic() - t1 < 1.0, "the next stream waited %.2f s" % (time.monotonic() - t1))
    finally:
        c.close()
    targets = [r["target"] for r in origin.host(HOST)["requests"]]
    H.check(not any("parked" in p for p in targets), "the reset stream reached the origin: %s" % targets)


def case_close_with_parked(t, proxy, origin):
    origin.reset()
    c = H2Client(proxy.port)
    c.request(authority(origin), "/slow?delay=0.5&i=holder")
    H.wait_until(lambda: origin.host(HOST)["in_flight"] == 1, 3.0, what="the holder at the origin")
    for i in range(50):
        c.request(authority(origin), "/slow?delay=0&i=parked%d" % i)
    H.wait_until(lambda: gauges(proxy)[1] == 50, 3.0, what="50 streams parked")
    c.close()
    idle = H.wait_until(lambda: gauges(proxy) == (0, 0), 5.0, what="in_flight and waiting back to 0")
    H.check(idle, "after the close: in_flight, waiting = %s" % (gauges(proxy),))
    c2 = H2Client(proxy.port)
    try:
        sid = c2.request(authority(origin), "/slow?delay=0&i=after")
        t0 = time.monotonic()
        H.check(c2.pump(c2.done([sid]), 5) and c2.responses[sid]["status"] == 200, "the next request failed")
        H.check(time.monotonic() - t0 < 1.0, "the next request waited %.2f s" % (time.monotonic() - t0))
    finally:
        c2.close()
    H.log("connection closed with 50 parked streams: gauges back to 0, next request at once")


def case_cookies(t, proxy, origin):
    origin.reset()
    c = H2Client(proxy.port)
    try:
        sid = c.request(authority(origin), "/echo", headers=[("cookie", "a=1"), ("cookie", "b=2")])
        H.check(c.pump(c.done([sid]), 10), "no answer")
        seen = json.loads(c.responses[sid]["body"])["headers"]
    finally:
        c.close()
    cookie = [v for k, v in seen if k.lower() == "cookie"]
    H.check(cookie == ["a=1; b=2"], "the origin got Cookie fields %s, expected one 'a=1; b=2'" % cookie)


def case_h2_in_tls(t):
    host = "h2tls.test"
    ca_cert, ca_key = t.gen_ca()
    t._cert = H.make_cert(t.workdir, host)
    origin = t.origin(tls=True)
    origin_cert, _ = t.cert()
    cfg = H.base_config(tls_port=origin.port, concurrency=2, rate=1000, burst=1000)
    cfg["tls"] = {"mode": "intercept", "ca_cert": ca_cert, "ca_key": ca_key, "upstream_ca_file": origin_cert}
    proxy = t.proxy(cfg, name="proxy-tls")
    ctx = ssl.create_default_context(cafile=ca_cert)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    ts = ctx.wrap_socket(H.connect_tunnel(proxy, host, origin.port), server_hostname=host)
    H.check(ts.selected_alpn_protocol() == "h2", "ALPN inside intercepted TLS chose %r, not h2"
            % ts.selected_alpn_protocol())
    c = H2Client(sock=ts, scheme="https")
    try:
        name = "%s:%d" % (host, origin.port)
        sids = [c.request(name, "/slow?delay=0.2&i=%d" % i) for i in range(16)]
        other = c.request("other.test:%d" % origin.port, "/elsewhere")
        H.check(c.pump(c.done(sids + [other]), 30), "not every stream ended: %s" % c.responses)
        bad = [(s, c.responses[s]["status"], c.responses[s]["body"][:200]) for s in sids
               if c.responses[s]["status"] != 200]
        H.check(not bad, "streams without 200: %s" % bad[:3])
        H.check(c.responses[other]["status"] == 421, "a stream for another host got %s, not 421"
                % c.responses[other]["status"])
    finally:
        c.close()
    st = origin.host(host)
    H.log("h2 inside intercepted TLS: 16 streams all 200, origin peak %d; another :authority got 421" % st["peak"])
    H.check(st["count"] == 16 and st["peak"] == 2, "origin saw count %d, peak %d; expected 16 and exactly 2"
            % (st["count"], st["peak"]))


def refused(proxy, reason):
    return H.mget(proxy.metrics(), "politeproxy_h2_streams_refused_total", default=0, reason=reason) or 0


def case_guards(t, proxy, origin):
    # Sent before the proxy's SETTINGS are read, so the client library does not hold them back.
    c = H2Client(proxy.port)
    try:
        sids = [c.request(authority(origin), "/slow?delay=0&i=%d" % i, send=False) for i in range(150)]
        c.flush()  # all at once: the proxy reads them in one go
        H.check(c.pump(c.done(sids), 30), "not every stream ended or was reset")
        refused_streams = [s for s in sids if c.responses[s]["reset"] == 7]
        answered = [s for s in sids if c.responses[s]["status"] is not None]
        H.check(len(refused_streams) == 50 and len(answered) == 100,
                "150 streams against 100: %d refused, %d answered" % (len(refused_streams), len(answered)))
    finally:
        c.close()
    H.check(refused(proxy, "too_many_streams") >= 50, "h2_streams_refused_total{too_many_streams} = %s"
            % refused(proxy, "too_many_streams"))

    good = H2Client(proxy.port)
    attacker = H2Client(proxy.port)
    try:
        H.check(good.pump(lambda: good.conn.remote_settings.max_concurrent_streams <= 1000, 5), "no SETTINGS")
        for i in range(300):
            sid = attacker.conn.get_next_available_stream_id()
            attacker.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                                             (":authority", authority(origin)), (":path", "/slow?delay=0.5")])
            attacker.conn.reset_stream(sid, error_code=8)
        attacker.flush()
        attacker.pump(lambda: attacker.terminated is not None, 10)
        H.check(attacker.terminated == 11, "rapid reset: the connection ended with %r, not ENHANCE_YOUR_CALM (11)"
                % attacker.terminated)
        slowest = 0.0
        for i in range(10):
            t0 = time.monotonic()
            sid = good.request(authority(origin), "/slow?delay=0&i=good%d" % i)
            H.check(good.pump(good.done([sid]), 5) and good.responses[sid]["status"] == 200,
                    "the well-behaved client's request %d failed: %s" % (i, good.responses[sid]))
            slowest = max(slowest, time.monotonic() - t0)
        H.check(slowest < 1.0, "the well-behaved client waited %.2f s" % slowest)
    finally:
        good.close()
        attacker.close()
    H.check(refused(proxy, "rapid_reset") >= 1, "h2_streams_refused_total{rapid_reset} = %s"
            % refused(proxy, "rapid_reset"))
    idle = H.wait_until(lambda: gauges(proxy) == (0, 0), 5.0, what="in_flight and waiting back to 0")
    H.check(idle, "after the attacks: in_flight, waiting = %s" % (gauges(proxy),))
    H.log("guards: 50 of 150 streams refused; rapid reset cut with ENHANCE_YOUR_CALM; the other client's"
          " slowest request %.3f s" % slowest)


def case_deadlines(t, origin):
    proxy = t.proxy(H.base_config(concurrency=2, rate=1000, burst=1000,
                                  timeouts={"idle": "1s", "response_headers": "5s"}), name="proxy-idle")
    c = H2Client(proxy.port)
    try:
        sid = c.request(authority(origin), "/slow?delay=2&i=long")
        H.check(c.pump(c.done([sid]), 10) and c.responses[sid]["status"] == 200,
                "a stream answered after 2 s (timeouts.idle 1 s) got %s; connection ended with %r"
                % (c.responses[sid], c.terminated))
        t0 = time.monotonic()
        c.sock.settimeout(5)
        closed = False
        try:
            while True:
                data = c.sock.recv(65536)
                if not data:
                    closed = True
                    break
                c.conn.receive_data(data)
        except OSError:
            closed = True
        waited = time.monotonic() - t0
        H.check(closed and 0.5 < waited < 3.0, "an idle h2 connection: closed %s after %.2f s (timeouts.idle 1 s)"
                % (closed, waited))
    finally:
        c.close()
    H.log("deadlines: a 2 s stream answered under a 1 s idle timeout; the idle connection closed after %.2f s"
          % waited)


def frames_until_close(sock, timeout):
    """Every frame the peer sends until it closes (python3-h2 takes any GOAWAY as the
    end, so frames after one are read here with hyperframe). [(frame, seconds)]"""
    import hyperframe.frame
    sock.settimeout(timeout)
    data, frames, t0 = b"", [], time.monotonic()
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        while len(data) >= 9:
            frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(data[:9]))
            if len(data) < 9 + length:
                break
            frame.parse_body(memoryview(data[9:9 + length]))
            data = data[9 + length:]
            frames.append((frame, time.monotonic() - t0))
    return frames


def case_drain(t, origin):
    """SIGTERM with a stream in flight: the client gets GOAWAY (NO_ERROR) at once, the
    stream is answered in full, then the connection closes and the proxy exits 0."""
    cfg = H.base_config(concurrency=2, rate=1000, burst=1000)
    cfg["drain_timeout"] = "10s"
    proxy = t.proxy(cfg, name="proxy-drain")
    c = H2Client(proxy.port)
    try:
        sid = c.request(authority(origin), "/drain?delay=1")
        H.wait_until(lambda: origin.host(HOST)["in_flight"] == 1, 3.0, what="the stream at the origin")
        os.kill(proxy.pid, signal.SIGTERM)
        frames = frames_until_close(c.sock, 10)
    finally:
        c.close()
    kinds = [(type(f).__name__, f.stream_id) for f, _ in frames]
    goaways = [(f, at) for f, at in frames if type(f).__name__ == "GoAwayFrame"]
    H.check(len(goaways) == 1 and goaways[0][0].error_code == 0 and goaways[0][1] < 0.9,
            "GOAWAY after SIGTERM: %r" % [(f.error_code, at) for f, at in goaways])
    H.check(goaways[0][0].last_stream_id == sid, "GOAWAY's last stream %d, want %d" % (goaways[0][0].last_stream_id, sid))
    headers = [f for f, _ in frames if type(f).__name__ == "HeadersFrame" and f.stream_id == sid]
    data = [f for f, _ in frames if type(f).__name__ == "DataFrame" and f.stream_id == sid]
    H.check(len(headers) == 1 and dict(c.conn.decoder.decode(headers[0].data)).get(":status") == "200",
            "the stream in flight during the drain got no 200: %r" % kinds)
    H.check(data and "END_STREAM" in data[-1].flags and frames.index(next(x for x in frames if x[0] is data[-1])) >
            frames.index(goaways[0]), "the stream did not end after the GOAWAY: %r" % kinds)
    code = proxy.stop()
    H.check(code == 0, "exit code %r after the drain" % code)
    H.log("drain: GOAWAY (NO_ERROR, last stream %d) %.2f s after SIGTERM, the stream in flight answered, the "
          "close after it; exit 0" % (sid, goaways[0][1]))


def test(t):
    origin = t.origin()
    proxy = t.proxy(H.base_config(concurrency=2, rate=1000, burst=1000))
    case_streams_gated(t, proxy, origin)
    case_bodies(t, proxy, origin)
    proxy1 = t.proxy(H.base_config(concurrency=1, rate=1000, burst=1000), name="proxy-c1")
    case_reset_parked(t, proxy1, origin)
    case_close_with_parked(t, proxy1, origin)
    case_cookies(t, proxy, origin)
    case_guards(t, proxy, origin)
    case_deadlines(t, origin)
    case_h2_in_tls(t)
    case_drain(t, origin)


if __name__ == "__main__":
    H.main(test, timeout=90)
