"""`compass-server serve`: the server until SIGINT or SIGTERM, and `config
check`."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
from collections.abc import Awaitable
from typing import Any

from compass_server import config, workers

log = logging.getLogger("compass_server")


async def serve(loaded: config.Loaded, worker_of: int | None = None) -> None:
    if worker_of is not None:
        workers.die_with_parent(worker_of)
    # The server is loaded only to serve: admin commands start without it.
    from compass_server.app import CompassServer

    server = CompassServer(loaded.settings, reuse_port=worker_of is not None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, server.reload_tls)
    await server.start()
    # What start-up built lives as long as the process: keep it out of every
    # collection's scan.
    gc.freeze()
    ready: dict[str, Any] = {"grpc_port": server.grpc_port, "http_port": server.http_port}
    if server.relay_port:
        ready["relay_port"] = server.relay_port
    if server.metrics_port:
        ready["metrics_port"] = server.metrics_port
    print(json.dumps({**ready, "ready": True}), flush=True)
    await stop.wait()
    log.info("shutting down")
    await server.drain()
    await server.stop()
    log.info("stopped")


def run(coro: Awaitable[Any], event_loop: str) -> Any:
    if event_loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            # Outside the try: an ImportError of the server's own is its to tell.
            return uvloop.run(coro)  # type: ignore[arg-type]
    return asyncio.run(coro)  # type: ignore[arg-type]
