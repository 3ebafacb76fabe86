#!/usr/bin/python3
"""Password guessing costs the guesser, not the other clients (security.users_file,
bcrypt cost 12: about a quarter of a second per new credential).

1. h2c: one connection sends 30 streams, each with another wrong credential. The first
   wrong one ends the connection (GOAWAY, then the close), as a wrong guess costs an
   HTTP/1.1 connection; the other streams are answered 407 without a hash of their own:
   all 30 are answered well within the time 30 hashes take (7 s and more), and the
   socket closes.
2. Fair turns: 12 HTTP/1.1 connections from 127.0.0.1 guess at once (12 distinct wrong
   credentials: 3 s and more of hashing, one at a time); a crawler from 127.0.0.2 with
   the right credentials, new to the proxy, is answered 200 after about one hash, not
   after the guesser's queue."""
import os
import socket
import sys
import threading
import time
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # libcrypt's bcrypt, as htpasswd -B writes it

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import hpack  # noqa: E402  (python3-h2's dependencies)
import hyperframe.frame  # noqa: E402
from test_h2c import H2Client  # noqa: E402
from test_proxy_auth import basic  # noqa: E402

HOST = "guess.test"


def get_from(source, proxy, url, credentials, timeout=20):
    """One HTTP/1.1 request from `source` (a loopback address); (status, seconds)."""
    started = time.monotonic()
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout, source_address=(source, 0))
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\nConnection: close\r\n\r\n"
                   % (url, HOST, credentials)).encode())
        head = b""
        while b"\r\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
    finally:
        s.close()
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else None
    return status, time.monotonic() - started


def read_answers(sock, streams, timeout):
    """Frames from the proxy until it closes or `timeout` passes: each stream's :status,
    the GOAWAY's error code (None: none came), whether the socket closed."""
    decoder = hpack.Decoder()
    statuses, goaway, buf = {}, None, b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return statuses, goaway, False
        except ConnectionResetError:
            return statuses, goaway, True
        if not data:
            return statuses, goaway, True
        buf += data
        while len(buf) >= 9:
            frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(buf[:9]))
            if len(buf) < 9 + length:
                break
            frame.parse_body(memoryview(buf[9:9 + length]))
            buf = buf[9 + length:]
            if isinstance(frame, hyperframe.frame.HeadersFrame):
                fields = dict(decoder.decode(frame.data))
                status = fields.get(":status", fields.get(b":status"))
                if frame.stream_id in streams:
                    statuses[frame.stream_id] = int(status)
            elif isinstance(frame, hyperframe.frame.GoAwayFrame):
                goaway = frame.error_code
    return statuses, goaway, False


def test(t):
    origin = t.origin()
    hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 12))
    path = os.path.join(t.workdir, "users.htpasswd")
    with open(path, "w") as f:
        f.write("crawler:%s\n" % hashed)
    cfg = H.base_config(concurrency=4, rate=100, burst=100)
    cfg["security"]["users_file"] = path
    proxy = t.proxy(cfg)
    target = "%s:%d" % (HOST, origin.port)
    url = "http://%s/x" % target

    # 1. One h2c connection, 30 wrong guesses. Read as raw frames: python3-h2 refuses the
    # responses a server may still send after its GOAWAY (to streams up to its last id).
    h = H2Client(proxy.port)
    started = time.monotonic()
    streams = [h.request(target, "/guess%d" % i, headers=[("proxy-authorization", basic("crawler", "guess%d" % i))],
                         send=False) for i in range(30)]
    h.flush()
    statuses, goaway, closed = read_answers(h.sock, streams, timeout=15)
    took = time.monotonic() - started
    H.log("1. 30 wrong guesses on one h2c connection: %d answered in %.2f s (statuses %s), GOAWAY %s, closed %s"
          % (len(statuses), took, sorted(set(statuses.values())), goaway, closed))
    H.check(len(statuses) == 30 and set(statuses.values()) == {407},
            "30 wrong guesses on one h2c connection: %d answered, statuses %s" % (len(statuses), set(statuses.values())))
    H.check(took < 3, "30 wrong guesses on one connection took %.2f s to answer: each was hashed" % took)
    H.check(goaway is not None and closed, "the connection stayed open after wrong credentials (GOAWAY %s, closed %s)"
            % (goaway, closed))
    h.sock.close()

    # 2. A guesser's queue does not hold up another client's first login.
    results = [None] * 12

    def guess(i):
        results[i] = get_from("127.0.0.1", proxy, url, basic("crawler", "wrong%d" % i))

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(12)]
    for th in threads:
        th.start()
    time.sleep(0.3)  # the guesses are queued, one is hashing
    status, took = get_from("127.0.0.2", proxy, url, basic("crawler", "s3cret"))
    for th in threads:
        th.join(30)
    guesses = sorted({r[0] for r in results if r}, key=str)
    slowest = max(r[1] for r in results if r)
    H.log("2. a new login from 127.0.0.2 while 127.0.0.1 guessed 12 times: %s in %.2f s "
          "(the guesses: %s, the last after %.2f s)" % (status, took, guesses, slowest))
    H.check(status == 200, "the crawler's login while another client guessed: %s" % status)
    H.check(took < 1.5, "the crawler's first login waited %.2f s behind another client's guesses" % took)
    H.check(set(guesses) <= {407, 503}, "the guesses were answered %s" % guesses)


if __name__ == "__main__":
    H.main(test, timeout=60)
