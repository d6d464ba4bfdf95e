"""The floor under an idle page stream: what the transports cost before any
Compass work.

Each server here is the bare library in its own process (on uvloop, as
Compass runs) implementing only `CommsService.Subscribe`: it sends the ready
frame and then waits, holding nothing of its own. `grpc` is a grpc.aio
server; `connect` is connectrpc's ASGI application served by hypercorn, the
page's own path. N streams are opened after a warm-up, each on a connection
of its own as N browsers or runners would hold them (`--shared` puts them on
one gRPC connection, which parts a stream's cost from its connection's),
and the server's RSS is read before and after, once it stops moving.

    .venv/bin/python -m bench.idle_streams [--n 1000] [--rounds 2] [--shared]

Set beside `python -m bench.waiting --subscribe-over grpc|connect`, whose
"KiB per subscriber" is the same measure of Compass's Subscribe.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import uvloop
from connectrpc.errors import ConnectError

from bench.mcp_wait import rss_kib
from compass.v1 import comms_connect, comms_pb2, comms_pb2_grpc

WARM_UP = 20


def _ready() -> comms_pb2.Event:
    return comms_pb2.Event(event_id=1, ready=comms_pb2.Ready())


class _IdleGrpc(comms_pb2_grpc.CommsServiceServicer):
    async def Subscribe(
        self, request: comms_pb2.SubscribeRequest, context: Any
    ) -> AsyncIterator[comms_pb2.Event]:
        yield _ready()
        await asyncio.Event().wait()


class _IdleConnect:
    async def subscribe(
        self, request: comms_pb2.SubscribeRequest, ctx: Any
    ) -> AsyncIterator[comms_pb2.Event]:
        yield _ready()
        await asyncio.Event().wait()

    def __getattr__(self, name: str) -> Any:
        async def unimplemented(request: Any, ctx: Any) -> Any:
            raise NotImplementedError(name)

        return unimplemented


async def _serve(kind: str) -> None:
    if kind == "grpc":
        server = grpc.aio.server()
        comms_pb2_grpc.add_CommsServiceServicer_to_server(_IdleGrpc(), server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()
        return
    import socket

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.set_inheritable(True)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.keep_alive_timeout = 3600
    app = comms_connect.CommsServiceASGIApplication(_IdleConnect())  # type: ignore[arg-type]
    print(sock.getsockname()[1], flush=True)
    await serve(app, config)  # type: ignore[arg-type]


async def _open_grpc(port: int, n: int, shared: bool, held: list[Any]) -> None:
    own = [("grpc.use_local_subchannel_pool", 1)]
    one = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    held.append(one)
    for _ in range(n):
        channel = one if shared else grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=own)
        call = comms_pb2_grpc.CommsServiceStub(channel).Subscribe(comms_pb2.SubscribeRequest())
        await call.read()
        held += [channel, call]


async def _open_connect(port: int, n: int, held: list[Any]) -> None:
    async def hold(ready: asyncio.Event) -> None:
        client = comms_connect.CommsServiceClient(f"http://127.0.0.1:{port}")
        try:
            with contextlib.suppress(ConnectError, asyncio.CancelledError):
                async for _event in client.subscribe(comms_pb2.SubscribeRequest()):
                    ready.set()
        finally:
            await client.close()

    for _ in range(n):
        ready = asyncio.Event()
        held.append(asyncio.ensure_future(hold(ready)))
        await asyncio.wait_for(ready.wait(), 30)


async def _settled(pid: int) -> int:
    last = rss_kib(pid)
    for _ in range(20):
        await asyncio.sleep(0.5)
        now = rss_kib(pid)
        if abs(now - last) < 256:
            return now
        last = now
    return last


async def measure(kind: str, n: int, shared: bool) -> float:
    """KiB of server RSS per idle stream."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.idle_streams", "serve", kind, stdout=subprocess.PIPE
    )
    held: list[Any] = []
    try:
        assert proc.stdout is not None
        port = int(await proc.stdout.readline())

        async def open_streams(count: int) -> None:
            if kind == "grpc":
                await _open_grpc(port, count, shared, held)
            else:
                await _open_connect(port, count, held)

        await open_streams(WARM_UP)
        before = await _settled(proc.pid)
        await open_streams(n)
        after = await _settled(proc.pid)
        return (after - before) / n
    finally:
        proc.kill()
        await proc.wait()
        for item in held:
            if isinstance(item, asyncio.Future):
                item.cancel()
            elif isinstance(item, grpc.aio.Channel):
                await item.close()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rows: dict[str, list[float]] = {}
    kinds = [("grpc", False), ("connect", False)]
    if args.shared:
        kinds.insert(1, ("grpc", True))
    for round_ in range(args.rounds):
        for kind, shared in kinds:
            name = f"{kind}, one connection" if shared else f"{kind}, a connection each"
            kib = await measure(kind, args.n, shared)
            rows.setdefault(name, []).append(kib)
            stamp = time.strftime("%H:%M:%S")
            print(f"[{stamp}] round {round_ + 1}: {name}: {kib:.1f} KiB", file=sys.stderr)
    return {"n": args.n, "kib_per_idle_stream": rows}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        uvloop.run(_serve(argv[1]))
        return
    p = argparse.ArgumentParser(prog="python -m bench.idle_streams", description=__doc__)
    p.add_argument("--n", type=int, default=1000, help="idle streams measured (default 1000)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--shared", action="store_true", help="also gRPC streams on one connection")
    args = p.parse_args(argv)
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
