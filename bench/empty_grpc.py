"""An empty gRPC server: what Python gRPC costs before any Compass work.

The server is a grpc.aio server in its own process (on uvloop when it imports,
as the real server will be) implementing only `CommsService.PostMessage`
(grpc's servicer method for the `post_message` RPC), which returns an empty
`PostMessageResponse` without looking at the request. The client sends a
realistic PostMessageRequest (one channel id, one ask block with one question
and two options) from K concurrent callers sharing one `grpc.aio` channel.

Two rows:

* `empty_grpc`:      one op = one unary PostMessage call;
* `empty_grpc_pair`: one op = two sequential unary calls: the transport-only
  floor of one ask lifecycle over gRPC (post + answer), so its ops/s compares
  directly with the ceiling's lifecycles/s.

Standalone:

    python -m bench.empty_grpc [--seconds 5] [--k 1,16]   # start a server, measure
    python -m bench.empty_grpc serve [--port 0]            # only the server
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc

from bench.harness import BenchContext, LoadResult, Measure, Row, resolve_loop, run_async
from bench.server import process_cpu_s
from compass.v1 import comms_pb2, comms_pb2_grpc

REPO_ROOT = Path(__file__).resolve().parent.parent
READY = "READY"
START_TIMEOUT_S = 20.0


# --------------------------------------------------------------------------- server


class EmptyComms(comms_pb2_grpc.CommsServiceServicer):
    async def PostMessage(
        self, request: comms_pb2.PostMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> comms_pb2.PostMessageResponse:
        return comms_pb2.PostMessageResponse()


async def serve(host: str, port: int, loop_name: str) -> None:
    server = grpc.aio.server()
    comms_pb2_grpc.add_CommsServiceServicer_to_server(EmptyComms(), server)  # type: ignore[abstract]
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch_stdin() -> None:
        # The parent holds our stdin open; EOF means it is done (or died).
        try:
            sys.stdin.buffer.read()
        finally:
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"{READY} {bound} {loop_name} pid={os.getpid()}", flush=True)
    await stop.wait()
    await server.stop(0.5)


# --------------------------------------------------------------------------- client


def post_request() -> comms_pb2.PostMessageRequest:
    return comms_pb2.PostMessageRequest(
        channel_id="bench-channel",
        blocks=[
            comms_pb2.MessageBlock(
                ask=comms_pb2.Ask(
                    questions=[
                        comms_pb2.AskQuestion(
                            question_id="deploy",
                            header="Deploy",
                            question="Ship the release to production now?",
                            options=[
                                comms_pb2.AskOption(id="yes", label="Yes, ship it"),
                                comms_pb2.AskOption(id="no", label="No, wait"),
                            ],
                            recommended=0,
                        )
                    ]
                )
            )
        ],
    )


@asynccontextmanager
async def server_process(loop_name: str = "auto") -> AsyncIterator[tuple[str, int]]:
    """Start `python -m bench.empty_grpc serve`; yield its target "host:port" and pid."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.empty_grpc",
        "serve",
        "--loop",
        loop_name,
        cwd=REPO_ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S)).decode().strip()
        if not line.startswith(READY):
            raise RuntimeError(f"empty gRPC server did not start (said {line!r})")
        port = line.split()[1]
        print(f"  [empty gRPC server: {line}]", file=sys.stderr, flush=True)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def open_rows(calls_per_op: int) -> Any:
    @asynccontextmanager
    async def open_empty_grpc(ctx: BenchContext) -> AsyncIterator[Measure]:
        server_loop = ctx.extra.get("server_loop", "auto")
        async with server_process(server_loop) as (target, pid):

            def probe() -> dict[str, float]:
                return {"server": process_cpu_s(pid)}

            async def measure(k: int) -> LoadResult:
                channel = grpc.aio.insecure_channel(target)
                try:
                    await asyncio.wait_for(channel.channel_ready(), 10)
                    stub = comms_pb2_grpc.CommsServiceStub(channel)
                    request = post_request()

                    async def call(i: int) -> None:
                        for _ in range(calls_per_op):
                            await stub.PostMessage(request)

                    return await ctx.load(call, k, cpu=probe)
                finally:
                    await channel.close()

            yield measure

    return open_empty_grpc


ROW = Row(
    key="empty_grpc",
    title="empty gRPC unary",
    op="one empty PostMessage call (grpc.aio, 1 shared channel)",
    open=open_rows(1),
)

PAIR_ROW = Row(
    key="empty_grpc_pair",
    title="empty gRPC pair",
    op="two sequential empty PostMessage calls (transport floor of post + answer)",
    open=open_rows(2),
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", nargs="?", choices=("measure", "serve"), default="measure")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    p.add_argument("--host", default="127.0.0.1", help="serve: address to bind")
    p.add_argument("--port", type=int, default=0, help="serve: port (0 = any free port)")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--k", default="1,16", help="comma-separated concurrencies")
    args = p.parse_args(argv)
    loop_name = resolve_loop(args.loop)

    if args.mode == "serve":
        run_async(serve(args.host, args.port, loop_name), loop_name)
        return

    ctx = BenchContext("", args.seconds, args.warmup, loop_name, {"server_loop": args.loop})

    async def go() -> None:
        for row in (ROW, PAIR_ROW):
            assert row.open is not None
            async with row.open(ctx) as measure:
                for k in (int(x) for x in args.k.split(",")):
                    print(f"{row.key} {(await measure(k)).summary()}", flush=True)

    run_async(go(), loop_name)


if __name__ == "__main__":
    main()
