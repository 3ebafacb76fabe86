#!/usr/bin/python3
"""A tiny HTTP/1.1 origin for the politeness scenario that counts requests in flight
per Host, exactly.

nginx can delay a response (echo_sleep) but cannot say how many requests of one Host
it was serving at once; this origin can, because it is one asyncio loop: a request is
"in flight" from the moment its header section has been read until the moment its
response is written. A proxy can only send a host's next request after it has read a
response, so a peak above the proxy's per-host bound here is a real breach, never an
artefact of clock resolution.

Paths:
  /slow      answered after --delay seconds (default 0.1): "ok\\n"
  /park      answered after --park-delay seconds (default 600), or never if the
             connection closes first
  anything else: answered at once, "ok\\n"
  /__stats   (not counted) JSON: completed, in_flight, per-host peak, peak, hosts,
             hold_sum (seconds requests were held, read to written: the origin's own
             share of each slot's time, so hosts x bound / mean_hold is the most any
             proxy could get through it)
  /__reset   (not counted) zero the counters and peaks

Every counted response carries "X-Bench-Origin: slow_origin". Keep-alive, one request
at a time per connection (pipelined requests wait their turn). Prints
"slow_origin: listening PORT" once bound (--port 0 picks a free port).
Standard library only.
"""

import argparse
import asyncio
import json

import origin_serve

RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
            b"X-Bench-Origin: slow_origin\r\n\r\nok\n")


class Stats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.completed = 0
        self.hold_sum = 0.0  # seconds from request read to response written, completed ones
        self.in_flight = {}
        self.peak = {}
        self.seen = set()

    def begin(self, host):
        n = self.in_flight.get(host, 0) + 1
        self.in_flight[host] = n
        if n > self.peak.get(host, 0):
            self.peak[host] = n
        self.seen.add(host)

    def end(self, host, completed, held=0.0):
        n = self.in_flight.get(host, 0) - 1
        if n <= 0:
            self.in_flight.pop(host, None)
        else:
            self.in_flight[host] = n
        if completed:
            self.completed += 1
            self.hold_sum += held

    def as_json(self):
        peaks = sorted(self.peak.values())
        hist = {}
        for p in peaks:
            hist[str(p)] = hist.get(str(p), 0) + 1
        return json.dumps({
            "completed": self.completed,
            "hold_sum": self.hold_sum,
            "mean_hold": self.hold_sum / self.completed if self.completed else None,
            "in_flight": sum(self.in_flight.values()),
            "hosts": len(self.seen),
            "peak": peaks[-1] if peaks else 0,
            "peak_histogram": hist,  # peak in flight -> number of hosts with that peak
            "worst_hosts": sorted(self.peak.items(), key=lambda kv: -kv[1])[:5],
        }).encode()


STATS = Stats()


class Conn(asyncio.Protocol):
    def __init__(self, delay, park_delay):
        self.delay = delay
        self.park_delay = park_delay
        self.buf = b""
        self.busy = None  # (host, timer) of the request being served
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        if self.busy:
            host, timer = self.busy
            timer.cancel()
            STATS.end(host, completed=False)
            self.busy = None

    def data_received(self, data):
        self.buf += data
        self.next_request()

    def next_request(self):
        if self.busy is not None:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > 65536:
                self.transport.close()
            return
        head = self.buf[:end].decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.transport.close()
            return
        target = parts[1]
        host = ""
        body_len = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            lname = name.strip().lower()
            if lname == "host":
                host = value.strip().lower()
            elif lname == "content-length":
                body_len = int(value.strip() or 0)
        if len(self.buf) < end + 4 + body_len:
            return
        self.buf = self.buf[end + 4 + body_len:]
        if target.startswith("http://"):  # absolute form: keep the path
            target = "/" + target[7:].partition("/")[2]
        if host.startswith("["):
            host = host.partition("]")[0] + "]"
        else:
            host = host.partition(":")[0]
        path = target.partition("?")[0]
        if path == "/__stats":
            body = STATS.as_json()
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                                 % len(body) + body)
            return self.next_request()
        if path == "/__reset":
            STATS.reset()
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return self.next_request()
        delay = self.delay if path == "/slow" else self.park_delay if path == "/park" else 0.0
        STATS.begin(host)
        loop = asyncio.get_running_loop()
        if delay <= 0:
            self.respond(host, loop.time())
            return
        timer = loop.call_later(delay, self.respond, host, loop.time())
        self.busy = (host, timer)

    def respond(self, host, started):
        self.busy = None
        # Counted out before the write: nothing else runs in between, and the proxy
        # can only send this host's next request after it has read this response.
        STATS.end(host, completed=True, held=asyncio.get_running_loop().time() - started)
        if self.transport.is_closing():
            return
        self.transport.write(RESPONSE)
        self.next_request()


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--park-delay", type=float, default=600.0)
    args = ap.parse_args()
    await origin_serve.serve("slow_origin", lambda: Conn(args.delay, args.park_delay), args.host, args.port)


if __name__ == "__main__":
    origin_serve.run(main)
