#!/usr/bin/python3
"""Parks requests in a proxy's queues: opens N client connections to the proxy and
sends one absolute-form request on each, to host PREFIX{i % HOSTS}.bench.test, then
holds every connection open without reading further.

Prints "park_load: sent N" once every request has been written (and "park_load:
error ..." lines for connections that failed), then waits until its stdin is closed
or it gets SIGTERM, reports how many responses arrived meanwhile (a parked request
gets none; a 503 would mean the queue refused it) and closes everything.
Standard library only; raise RLIMIT_NOFILE before starting it for N near 10k.
"""

import argparse
import asyncio
import signal
import sys


class Client(asyncio.Protocol):
    def __init__(self, state):
        self.state = state
        self.got = b""

    def data_received(self, data):
        if not self.got:
            self.state["responses"] += 1
            status = data[:12].decode("latin-1", "replace")
            self.state["statuses"][status] = self.state["statuses"].get(status, 0) + 1
        self.got += data[:64]

    def connection_lost(self, exc):
        self.state["closed"] += 1


async def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--proxy-port", type=int, required=True)
    ap.add_argument("--origin-port", type=int, required=True)
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--path", default="/park")
    ap.add_argument("--prefix", default="p")
    ap.add_argument("--batch", type=int, default=500)
    args = ap.parse_args()

    loop = asyncio.get_running_loop()
    state = {"responses": 0, "closed": 0, "statuses": {}}
    transports = []
    errors = 0

    async def one(i):
        host = "%s%d.bench.test:%d" % (args.prefix, i % args.hosts, args.origin_port)
        req = ("GET http://%s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: park_load\r\n\r\n"
               % (host, args.path, host)).encode()
        t, _ = await loop.create_connection(lambda: Client(state), "127.0.0.1", args.proxy_port)
        t.write(req)
        transports.append(t)

    for start in range(0, args.connections, args.batch):
        res = await asyncio.gather(*(one(i) for i in range(start, min(start + args.batch, args.connections))),
                                   return_exceptions=True)
        for r in res:
            if isinstance(r, Exception):
                errors += 1
                if errors <= 5:
                    print("park_load: error %r" % (r,), flush=True)
    print("park_load: sent %d errors %d" % (len(transports), errors), flush=True)

    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_reader(sys.stdin.fileno(), lambda: done.set() if not sys.stdin.buffer.read1(4096) else None)
    await done.wait()
    print("park_load: responses %d closed_by_peer %d statuses %r"
          % (state["responses"], state["closed"], state["statuses"]), flush=True)
    for t in transports:
        t.abort()
    await asyncio.sleep(0.2)


if __name__ == "__main__":
    asyncio.run(main())
