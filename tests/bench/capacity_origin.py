#!/usr/bin/python3
"""An HTTP/1.1 origin with C workers whose capacity C changes on a schedule, for the
adaptive-limit benchmark (adaptive_bench.py).

Model (one asyncio loop, no threads, so every count is exact):
  - A counted request is admitted to one FIFO queue when its header section has been
    read. It goes into service as soon as fewer than C requests are in service; its
    service takes --service constant (exactly --mean seconds) or exponential
    (random.expovariate with mean --mean, from a generator seeded by --seed and reseeded
    at /__start, so runs with the same seed draw the same sequence of service times).
  - The wall: a request that arrives while `waiting >= 2 * C` (waiting = queued, not yet
    in service) is answered at once "503 Service Unavailable" with "Retry-After:
    --retry-after" and is never queued.
  - The schedule, --schedule "8:40,2:40,8:40" (capacity:seconds, comma-separated), runs
    from /__start; after its last phase C stays at the last value. When C falls, the
    requests in service finish; none starts while in service >= C. When C rises, waiting
    requests start at once (a timer fires at every phase boundary).
  - A client that closes its connection while its request waits leaves the queue
    (status 499 in the trace); one that closes during service keeps its worker busy until
    the service ends (status 499 too: the work was done, nobody read it).

Paths (the request target may be origin-form or absolute-form):
  /__start   (not counted) clears the trace, starts the schedule's clock (t0) and reseeds
             the service-time generator; answers {"start": t0} (t0 in the monotonic
             clock, the same CLOCK_MONOTONIC as Python's time.monotonic() in any process)
  /__stats   (not counted) {"start": t0, "now": ..., "schedule": [[C, seconds], ...],
             "service": ..., "mean": ..., "events": [[arrival, start, finish, status,
             host], ...]}, times in seconds relative to t0. start is null for a request
             never served (503, or left the queue); finish and status are null while a
             request is still queued or in service.
  /__reset   (not counted) clears the trace and stops the clock (requests in service or
             queued still complete)
  anything else: counted; 200 "ok\\n" after its service, or the 503 above.

Every counted response carries "X-Bench-Origin: capacity_origin". Keep-alive, one request
at a time per connection (a pipelined request waits until the one before is answered);
request bodies with a Content-Length are read and ignored. Prints
"capacity_origin: listening PORT" once bound (--port 0 picks a free port).
Standard library only.
"""

import argparse
import asyncio
import collections
import json
import random

import origin_serve

OK_RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
               b"X-Bench-Origin: capacity_origin\r\n\r\nok\n")
BUSY_BODY = b"busy\n"
MAX_HEAD = 65536
CLIENT_GONE = 499  # the trace's status for a request whose client closed first


def parse_schedule(text):
    """'8:40,2:40' -> [(8, 40.0), (2, 40.0)]"""
    phases = []
    for part in text.split(","):
        cap, _, secs = part.strip().partition(":")
        phases.append((int(cap), float(secs)))
    if not phases or any(c < 1 or s <= 0 for c, s in phases):
        raise ValueError("schedule needs capacity >= 1 and seconds > 0 in every phase: %r" % text)
    return phases


class Request:
    __slots__ = ("conn", "host", "arrival", "start", "finish", "status")

    def __init__(self, conn, host, arrival):
        self.conn = conn
        self.host = host
        self.arrival = arrival
        self.start = None
        self.finish = None
        self.status = None


class Origin:
    """The workers, the queue, the schedule and the trace. Time comes from the loop."""

    def __init__(self, loop, schedule, service, mean, seed, retry_after):
        self.loop = loop
        self.schedule = schedule
        self.service = service
        self.mean = mean
        self.seed = seed
        self.retry_after = retry_after
        self.queue = collections.deque()
        self.in_service = 0
        self.t0 = None
        self.events = []
        self.timers = []
        self.rng = random.Random(seed)

    # ---- clock and schedule ----------------------------------------------------------
    def start_clock(self):
        self.clear()
        self.t0 = self.loop.time()
        self.rng = random.Random(self.seed)
        at = self.t0
        for _, secs in self.schedule:
            at += secs
            self.timers.append(self.loop.call_at(at, self.dispatch))
        return self.t0

    def clear(self):
        for timer in self.timers:
            timer.cancel()
        self.timers = []
        self.events = []
        self.t0 = None

    def capacity(self, now):
        if self.t0 is None:
            return self.schedule[0][0]
        elapsed = now - self.t0
        for cap, secs in self.schedule:
            if elapsed < secs:
                return cap
            elapsed -= secs
        return self.schedule[-1][0]

    def service_time(self):
        if self.service == "constant":
            return self.mean
        return self.rng.expovariate(1.0 / self.mean)

    # ---- requests --------------------------------------------------------------------
    def admit(self, conn, host):
        """A counted request's head was read: 503 at once, or queue (and maybe serve)."""
        now = self.loop.time()
        req = Request(conn, host, now)
        self.events.append(req)
        if len(self.queue) >= 2 * self.capacity(now):
            req.finish, req.status = now, 503
            conn.answer_busy(self.retry_after)
            return None
        self.queue.append(req)
        self.dispatch(now)
        return req

    def dispatch(self, now=None):
        """Starts waiting requests while fewer than C are in service. `now`: the caller's
        clock reading, so that a request served at once has start == arrival exactly."""
        now = self.loop.time() if now is None else now
        cap = self.capacity(now)
        while self.in_service < cap and self.queue:
            req = self.queue.popleft()
            req.start = now
            self.in_service += 1
            self.loop.call_later(self.service_time(), self.finish, req)

    def finish(self, req):
        self.in_service -= 1
        req.finish = self.loop.time()
        req.status = 200 if req.conn.answer_ok(req) else CLIENT_GONE
        self.dispatch(req.finish)

    def abandon(self, req):
        """The client closed its connection: a queued request leaves the queue."""
        if req.start is None and req.finish is None:
            self.queue.remove(req)
            req.finish, req.status = self.loop.time(), CLIENT_GONE

    # ---- control ---------------------------------------------------------------------
    def stats_json(self):
        t0 = self.t0 if self.t0 is not None else 0.0

        def rel(t):
            return None if t is None else round(t - t0, 6)

        return json.dumps({
            "start": self.t0,
            "now": rel(self.loop.time()),
            "schedule": [[c, s] for c, s in self.schedule],
            "service": self.service,
            "mean": self.mean,
            "seed": self.seed,
            "retry_after": self.retry_after,
            "in_service": self.in_service,
            "waiting": len(self.queue),
            "events": [[rel(r.arrival), rel(r.start), rel(r.finish), r.status, r.host] for r in self.events],
        }, separators=(",", ":")).encode()


class Conn(asyncio.Protocol):
    def __init__(self, origin):
        self.origin = origin
        self.buf = b""
        self.current = None  # the counted request being served or queued
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        if self.current is not None:
            self.origin.abandon(self.current)

    def data_received(self, data):
        self.buf += data
        self.next_request()

    def write(self, data):
        self.transport.write(data)

    def answer_ok(self, req):
        """Called by the origin when req's service ends; False if the client is gone."""
        self.current = None
        if self.transport.is_closing():
            return False
        self.write(OK_RESPONSE)
        self.loop_next()
        return True

    def answer_busy(self, retry_after):
        self.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                   b"Retry-After: %d\r\nX-Bench-Origin: capacity_origin\r\n\r\n%s"
                   % (len(BUSY_BODY), retry_after, BUSY_BODY))

    def answer_json(self, body):
        self.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                   % len(body) + body)

    def loop_next(self):
        # the next pipelined request, if any, after this call returns (no recursion)
        if self.buf:
            asyncio.get_running_loop().call_soon(self.next_request)

    def next_request(self):
        while self.current is None and not self.transport.is_closing():
            head = self.read_head()
            if head is None:
                return
            path, host = head
            if path == "/__start":
                self.answer_json(json.dumps({"start": self.origin.start_clock()}).encode())
            elif path == "/__stats":
                self.answer_json(self.origin.stats_json())
            elif path == "/__reset":
                self.origin.clear()
                self.answer_json(b"{}")
            else:
                self.current = self.origin.admit(self, host)

    def read_head(self):
        """(path, host) of the next complete request, its body skipped; None if incomplete."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                self.transport.close()
            return None
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            self.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.transport.close()
            return None
        host, body_len = "", 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "host":
                host = value.strip().lower()
            elif name == "content-length":
                body_len = int(value.strip() or 0)
        if len(self.buf) < end + 4 + body_len:
            return None
        self.buf = self.buf[end + 4 + body_len:]
        target = parts[1]
        if target.startswith("http://"):  # absolute form: keep the path
            target = "/" + target[7:].partition("/")[2]
        return target.partition("?")[0], host


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--schedule", default="8:40,2:40,8:40", help="capacity:seconds,... (default %(default)s)")
    ap.add_argument("--service", choices=["constant", "exponential"], default="constant")
    ap.add_argument("--mean", type=float, default=0.1, help="mean service time, seconds (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--retry-after", type=int, default=1, help="Retry-After of the 503s, seconds")
    args = ap.parse_args()
    try:
        schedule = parse_schedule(args.schedule)
    except ValueError as e:
        ap.error(str(e))
    origin = Origin(asyncio.get_running_loop(), schedule, args.service, args.mean, args.seed, args.retry_after)
    await origin_serve.serve("capacity_origin", lambda: Conn(origin), args.host, args.port)


if __name__ == "__main__":
    origin_serve.run(main)
