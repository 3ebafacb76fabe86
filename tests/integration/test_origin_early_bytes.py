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
written, not after."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


class EarlyOrigin(H.RawServer):
    def __init__(self):
        self.heads = []  # (connection, first line)
        H.RawServer.__init__(self, "early-origin")

    def _serve(self, s, idx):
        buf = b""
        s.settimeout(5)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                with self.lock:
                    self.heads.append((idx, line))
                if line.startswith("POST") and "/continue" in line:
                    # An interim answer while the body streams, then the final one after it.
                    s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    while len(buf) < 10:
                        d = s.recv(65536)
                        if not d:
                            return
                        buf += d
                    buf = buf[10:]
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\nanswer to post")
                    continue
                if line.startswith("POST") and "/after-close" in line:
                    while len(buf) < 10:  # the whole body, then the answer
                        d = s.recv(65536)
                        if not d:
                            return
                        buf += d
                    buf = buf[10:]
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\nanswer to post")
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


if __name__ == "__main__":
    H.main(test, timeout=30)
