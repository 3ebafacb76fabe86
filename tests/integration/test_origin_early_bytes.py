#!/usr/bin/python3
"""An origin that speaks on a reused connection before the request is written whole.

The origin answers a first GET (keep-alive); a second client's POST goes on that pooled
connection, its body sent in two parts 0.5 s apart. As soon as the origin has the POST's
head it sends a complete response ("EARLY") and then keeps reading. Whatever an origin
sends before its request was written whole answers no request the proxy can tell: the
proxy treats it as a protocol error on that connection (closed), answers the POST 502
(not retryable), never relays "EARLY", and the next request gets its own answer on a new
connection. An interim response that early (100 Continue to the body) is this request's:
a POST whose origin sends one while the body streams gets its 200. And an origin that
closes a pooled connection while it idles: the next request, a POST (never sent twice),
goes on a new connection and gets its 200, no 502: the close is seen before the POST is
written, not after. An h2c client's POST (content-length 10) whose 10 bytes come without
END_STREAM, then an empty END_STREAM DATA frame 0.5 s later: the origin (on a pooled
connection) answers once it has the 10 bytes, and the client gets that 200, no 502: the
body is written whole when content-length is reached, not when END_STREAM comes."""
import os
import socket
import sys
import time

import h2.exceptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from test_h2c import H2Client  # noqa: E402


class EarlyOrigin(H.RawServer):
    def __init__(self):
        self.heads = []  # (connection, first line)
        H.RawServer.__init__(self, "early-origin")

    def _serve(self, s, idx):
        buf = b""
        s.settimeout(5)
        try:
            while True:
                got = H.recv_head(s, buf)
                if got is None:
                    return
                head, buf = got
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                with self.lock:
                    self.heads.append((idx, line))
                # POSTs whose whole body (10 bytes) is read before their answer: after a 100
                # Continue sent while it streams, after an idle close, or as soon as it is whole.
                answers = {"/continue": b"answer to post", "/after-close": b"answer to post",
                           "/whole-body": b"answer to whole-body"}
                path = line.split(" ")[1] if " " in line else ""
                wanted = [p for p in answers if path.endswith(p)]
                if line.startswith("POST") and wanted:
                    if wanted[0] == "/continue":
                        s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    buf = H.recv_until(s, buf, lambda b: len(b) >= 10)  # the whole body
                    if buf is None:
                        return
                    buf = buf[10:]
                    body = answers[wanted[0]]
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                    continue
                if "/then-close" in line:  # answered, then closed while the proxy pools it
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nclosed")
                    time.sleep(0.1)
                    s.close()
                    return
                if line.startswith("POST"):
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEARLY")
                    continue  # and reads on: the body's rest arrives as the next "request"
                tag = line.split(" ")[1].rsplit("=", 1)[-1]
                body = ("answer to %s" % tag).encode()
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            return


def raw(proxy, data, pause_then=None):
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    s.sendall(data)
    if pause_then is not None:
        time.sleep(0.5)
        try:
            s.sendall(pause_then)
        except OSError:
            pass
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
            if b"\r\n\r\n" in got:
                head, _, rest = got.partition(b"\r\n\r\n")
                n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if n and len(rest) >= n[0]:
                    break
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return got


def test(t):
    origin = EarlyOrigin()
    cfg = H.base_config(concurrency=2, rate=100, burst=100)
    cfg["workers"] = 1  # one origin pool: the POST reuses the first GET's connection
    proxy = t.proxy(cfg)
    host = "early.test:%d" % origin.port
    first = raw(proxy, b"GET http://%s/x?id=1 HTTP/1.1\r\nHost: early.test\r\n\r\n" % host.encode())
    H.check(b"answer to 1" in first, "the first GET: %r" % first[:120])
    post = raw(proxy, b"POST http://%s/upload HTTP/1.1\r\nHost: early.test\r\nContent-Length: 10\r\n\r\n12345"
               % host.encode(), pause_then=b"67890")
    H.log("a POST whose origin answered before the body was written: %r" % post[:60])
    H.check(b"EARLY" not in post, "the origin's bytes sent before the request was written whole reached the "
            "client: %r" % post[:120])
    H.check(post.startswith(b"HTTP/1.1 502"), "expected 502 for the POST, got %r" % post[:60])
    after = raw(proxy, b"GET http://%s/x?id=3 HTTP/1.1\r\nHost: early.test\r\n\r\n" % host.encode())
    # An interim 100 Continue while the body streams answers this request: no 502.
    cont = raw(proxy, b"POST http://%s/continue HTTP/1.1\r\nHost: early.test\r\nContent-Length: 10\r\n\r\n12345"
               % host.encode(), pause_then=b"67890")
    H.log("a POST whose origin sent 100 Continue while the body streamed: %r" % cont[:40])
    H.check(cont.startswith(b"HTTP/1.1 200") and cont.endswith(b"answer to post"),
            "an interim 100 while the body streamed spoiled the request: %r" % cont[:120])
    H.check(b"answer to 3" in after, "the next request after the early bytes: %r" % after[:120])
    # The origin closes the pooled connection while it idles: the POST after it never
    # goes on it (a POST is not sent again), so it gets its answer.
    closing = raw(proxy, b"GET http://%s/then-close HTTP/1.1\r\nHost: early.test\r\n\r\n" % host.encode())
    H.check(closing.endswith(b"closed"), "the GET before the idle close: %r" % closing[:120])
    time.sleep(0.4)
    late = raw(proxy, b"POST http://%s/after-close HTTP/1.1\r\nHost: early.test\r\nContent-Length: 10\r\n\r\n"
               b"1234567890" % host.encode())
    H.log("a POST after the origin closed the pooled connection: %r" % late[:40])
    H.check(late.startswith(b"HTTP/1.1 200") and late.endswith(b"answer to post"),
            "a POST after the origin closed its pooled connection while idle: %r" % late[:120])
    with origin.lock:
        conns = [c for c, line in origin.heads if line.startswith("GET") and "id=3" in line]
        post_conn = [c for c, line in origin.heads if line.startswith("POST")]
    H.check(post_conn and conns and conns[0] != post_conn[0],
            "the next request went on the connection the origin spoke early on (%s, %s)" % (post_conn, conns))
    # An h2c POST whose body is whole (content-length 10) before its END_STREAM, on a
    # pooled connection: the origin's answer to the whole body is its answer.
    pooled = raw(proxy, b"GET http://%s/x?id=5 HTTP/1.1\r\nHost: early.test\r\n\r\n" % host.encode())
    H.check(b"answer to 5" in pooled, "the GET before the h2c POST: %r" % pooled[:120])
    c = H2Client(proxy.port)
    try:
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", host),
                                  (":path", "/whole-body"), ("content-length", "10")])
        c.responses[sid] = {"status": None, "headers": {}, "body": b"", "ended": False, "reset": None}
        c.conn.send_data(sid, b"1234567890")  # the whole body, without END_STREAM
        c.flush()
        c.pump(lambda: False, 0.5)  # reads what comes for 0.5 s: the answer may come meanwhile
        early = c.responses[sid]["status"] is not None
        try:
            c.conn.send_data(sid, b"", end_stream=True)  # END_STREAM 0.5 s later
            c.flush()
        except (h2.exceptions.StreamClosedError, OSError):
            pass  # the proxy closed the stream once it answered
        c.pump(c.done([sid]), 5)
        r = c.responses[sid]
    finally:
        c.close()
    H.log("an h2c POST whose body was whole before its END_STREAM: status %s, body %r (answered before "
          "END_STREAM: %s)" % (r["status"], r["body"][:40], early))
    H.check(r["status"] == 200 and r["body"] == b"answer to whole-body",
            "an h2c POST (content-length 10, END_STREAM 0.5 s after the 10 bytes) whose origin answered the "
            "whole body before END_STREAM: status %s, proxy-status %r, body %r; expected 200 and "
            "'answer to whole-body'" % (r["status"], r["headers"].get("proxy-status"), r["body"][:120]))
    with origin.lock:
        get5 = [n for n, line in origin.heads if "id=5" in line]
        whole = [n for n, line in origin.heads if "/whole-body" in line]
    H.check(get5 and whole == get5, "the h2c POST did not go on the GET's pooled connection (%s, %s)"
            % (get5, whole))


if __name__ == "__main__":
    H.main(test, timeout=30)
