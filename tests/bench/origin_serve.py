"""What the benchmark's asyncio origins (slow_origin.py, capacity_origin.py) share: listen,
print "NAME: listening PORT" once bound, serve until SIGTERM or SIGINT, exit 0."""

import asyncio
import signal
import sys


async def serve(name, protocol_factory, host, port):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(protocol_factory, host, port, backlog=4096, reuse_address=True)
    print("%s: listening %d" % (name, server.sockets[0].getsockname()[1]), flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def run(main):
    """asyncio.run(main()), quietly on Ctrl-C, then exit 0."""
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    sys.exit(0)
