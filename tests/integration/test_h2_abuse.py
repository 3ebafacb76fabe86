#!/usr/bin/python3
"""HTTP/2 abusers against the proxy, each from its own process and connection, while a
well-behaved h2c client on another connection keeps sending requests and timing them:
1. CONTINUATION flood: HEADERS without END_HEADERS, then 20 000 CONTINUATION frames
   -> the connection is cut off (GOAWAY or close) long before the frames end.
2. 1000 streams opened at once (against the advertised 100) -> the ones beyond 100 are
   refused with REFUSED_STREAM, the rest answered.
3. Rapid reset: 5000 streams opened and reset at once -> GOAWAY ENHANCE_YOUR_CALM.
4. PING and SETTINGS floods (500 000 frames whose ACKs the abuser never reads: more than
   the socket buffers hold) -> cut off.
5. A header block that decodes to 70 KB (over limits.request_header_bytes) -> that
   stream is reset, the next request on the same connection is answered.
Each counted in h2_streams_refused_total{reason}. The well-behaved client sends requests
one after another for as long as the attacks last: its p99 stays within 5x (+20 ms) of
its p99 before them, every one of its requests is answered, the proxy's RSS grows by less
than 64 MiB (not checked in sanitizer builds, whose RSS holds freed memory), and afterwards every host's
in_flight and waiting are 0."""
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

import h2.config
import h2.connection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from test_h2c import H2Client  # noqa: E402

HOST = "abuse.test"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def read_until_closed(sock, timeout):
    """Bytes the proxy sent until it closed (or `timeout`), and whether it closed."""
    sock.settimeout(timeout)
    got, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return got, False
        except OSError:
            return got, True
        if not chunk:
            return got, True
        got += chunk
    return got, False


def goaway_code(data):
    """The error code of the first GOAWAY frame in `data`, or None."""
    i = 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i:i + 3], "big")
        if data[i + 3] == 7 and i + 9 + 8 <= len(data):
            return int.from_bytes(data[i + 13:i + 17], "big")
        i += 9 + length
    return None


def attack(kind, port, authority):
    """Runs one attack (in its own process); prints one result line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    s.sendall(conn.data_to_send())
    fields = [(":method", "GET"), (":scheme", "http"), (":authority", authority), (":path", "/abuse")]
    sent = 0
    t0 = time.monotonic()
    try:
        if kind == "continuation":
            block = conn.encoder.encode(fields)
            s.sendall(frame(1, 0, 1, block))  # HEADERS, END_STREAM, no END_HEADERS
            junk = conn.encoder.encode([("x-pad", "a")])
            batch = b"".join(frame(9, 0, 1, junk) for _ in range(500))
            for _ in range(40):  # 20 000 CONTINUATION frames
                s.sendall(batch)
                sent += 500
        elif kind == "streams":
            out = b""
            for i in range(1000):
                out += frame(1, 0x5, 1 + 2 * i, conn.encoder.encode(fields))  # END_STREAM | END_HEADERS
            s.sendall(out)
            sent = 1000
        elif kind in ("ping", "settings"):  # control frames whose ACKs it never reads
            one = frame(6, 0, 0, b"12345678") if kind == "ping" else frame(4, 0, 0, b"")
            batch = one * 1000
            for _ in range(500):  # more ACKs than the socket buffers on both sides hold
                s.sendall(batch)
                sent += 1000
        elif kind == "big_header":  # a header block that decodes past limits.request_header_bytes
            big = fields + [("x-big", "v" * 70000)]
            block = conn.encoder.encode(big)
            out = frame(1, 0x1, 1, block[:16384])
            rest = block[16384:]
            while rest:
                piece, rest = rest[:16384], rest[16384:]
                out += frame(9, 0 if rest else 0x4, 1, piece)  # END_HEADERS on the last
            out += frame(1, 0x5, 3, conn.encoder.encode(fields))  # then a normal request on the same connection
            s.sendall(out)
            sent = 2
        elif kind == "rapid_reset":
            out = b""
            for i in range(5000):
                sid = 1 + 2 * i
                out += frame(1, 0x5, sid, conn.encoder.encode(fields)) + frame(3, 0, sid, (8).to_bytes(4, "big"))
            s.sendall(out)
            sent = 5000
    except OSError:
        pass  # cut off while sending: what the guard is for
    got, closed = read_until_closed(s, 3 if kind in ("streams", "big_header") else 10)  # those stay open
    refused = answered = 0
    i = 0
    while i + 9 <= len(got):  # count RST_STREAM(REFUSED_STREAM) and HEADERS on stream ids
        length = int.from_bytes(got[i:i + 3], "big")
        kind_byte = got[i + 3]
        if kind_byte == 3 and int.from_bytes(got[i + 9:i + 13], "big") == 7:
            refused += 1
        elif kind_byte == 1:
            answered += 1
        i += 9 + length
    print("RESULT sent=%d closed=%d goaway=%s refused=%d answered=%d seconds=%.2f"
          % (sent, closed, goaway_code(got), refused, answered, time.monotonic() - t0), flush=True)


def timed_requests(port, authority, count, latencies, errors, stop=None):
    """Requests one at a time on one connection: `count` of them, or until `stop` is set."""
    c = H2Client(port)
    try:
        for _ in range(count):
            if stop is not None and stop.is_set():
                break
            t0 = time.monotonic()
            sid = c.request(authority, "/fast")
            if not c.pump(c.done([sid]), 10) or c.responses[sid]["status"] != 200:
                errors.append(c.responses[sid])
                continue
            latencies.append(time.monotonic() - t0)
    finally:
        c.close()


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test(t):
    origin = t.origin()
    authority = "%s:%d" % (HOST, origin.port)
    proxy = t.proxy(H.base_config(concurrency=100, rate=100000, burst=100000, adaptive={"hard_max": 100}))
    # warm-up, then the well-behaved client's latency alone
    timed_requests(proxy.port, authority, 20, [], [])
    before, errors = [], []
    timed_requests(proxy.port, authority, 200, before, errors)
    H.check(not errors, "before the attacks: %r" % errors[:3])
    rss_before = rss_kb(proxy.pid)

    during, errors = [], []
    stop = threading.Event()
    good = threading.Thread(target=timed_requests, args=(proxy.port, authority, 100000, during, errors, stop),
                            daemon=True)
    good.start()
    attacks_began = time.monotonic()
    results = {}
    for kind in ("continuation", "streams", "rapid_reset", "ping", "settings", "big_header"):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--attack", kind, str(proxy.port), authority],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150)
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
        H.check(line, "attack %s: %s" % (kind, r.stdout[-500:]))
        results[kind] = dict(kv.split("=") for kv in line[0].split()[1:])
        H.log("attack %s: %s" % (kind, line[0]))
    stop.set()
    good.join(60)
    attack_seconds = time.monotonic() - attacks_began
    H.check(not errors and len(during) >= 100, "the well-behaved client during the attacks (%.1f s): %d answered, "
            "errors %r" % (attack_seconds, len(during), errors[:3]))
    rss_after = rss_kb(proxy.pid)

    cont = results["continuation"]
    H.check((cont["closed"] == "1" or cont["goaway"] != "None") and float(cont["seconds"]) < 5,
            "CONTINUATION flood not cut off: %r" % cont)
    streams = results["streams"]
    H.check(int(streams["refused"]) >= 900 - 5 and int(streams["answered"]) >= 95,
            "1000 streams at once: %r (want 900 refused, 100 answered)" % streams)
    rr = results["rapid_reset"]
    H.check(rr["goaway"] == "11", "rapid reset: %r (want GOAWAY ENHANCE_YOUR_CALM, 11)" % rr)
    for kind in ("ping", "settings"):
        H.check(results[kind]["closed"] == "1", "%s flood not cut off: %r" % (kind, results[kind]))
    big = results["big_header"]
    H.check(big["closed"] == "0" and big["answered"] == "1", "oversized header block: %r (want the stream reset, "
            "the next request on the connection answered)" % big)
    m = proxy.metrics()
    counted = {r: H.mget(m, "politeproxy_h2_streams_refused_total", default=0, reason=r) or 0
               for r in ("flood", "too_many_streams", "rapid_reset", "header_size")}
    H.check(counted["too_many_streams"] >= 895 and counted["rapid_reset"] >= 1 and counted["flood"] >= 3 and
            counted["header_size"] >= 1, "h2_streams_refused_total: %r" % counted)

    base99, attack99 = p99(before), p99(during)
    H.log("well-behaved client: p99 %.1f ms alone, %.1f ms during the attacks (%d requests over %.1f s; median "
          "%.1f -> %.1f ms)" % (base99 * 1e3, attack99 * 1e3, len(during), attack_seconds,
                               statistics.median(before) * 1e3, statistics.median(during) * 1e3))
    H.check(attack99 <= 5 * base99 + 0.020, "p99 during the attacks %.1f ms against %.1f ms alone"
            % (attack99 * 1e3, base99 * 1e3))
    H.log("proxy RSS %d -> %d KiB; h2_streams_refused_total %r" % (rss_before, rss_after, counted))
    if H.SLOW == 1:  # a sanitizer build's RSS holds its quarantine of freed memory (256 MiB)
        H.check(rss_after - rss_before < 64 * 1024, "RSS grew by %d KiB" % (rss_after - rss_before))
    H.wait_until(lambda: all(h["in_flight"] == 0 and h["waiting"] == 0
                             for h in __import__("json").loads(proxy.admin_get("/hosts")[2])), 5.0,
                 what="in_flight and waiting back to 0")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--attack":
        attack(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        H.main(test, timeout=120)
