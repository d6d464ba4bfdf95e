"""PostMessage into the real server over gRPC: the server's cost of one write
next to the empty grpc.aio method (`empty_grpc`), which is the transport alone.

One op: an agent posts a text block (one short sentence) to its channel; no
ask, so no presence recompute: one insert and one event. The K workers share
one grpc.aio channel; worker i posts as agent i into channel i, all in one
workspace (its event log orders every post of the K workers).

Standalone:

    python -m bench.server_post --database-url URL [--k 1,16] [--seconds 5]
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc

from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Row,
    default_database_url,
    resolve_loop,
    run_async,
)
from bench.server import Team, cpu_probe, shared_server, text_request
from compass.v1 import comms_pb2_grpc

TEXT = "Build 4812 passed; deploying to staging now."


@asynccontextmanager
async def open_post_grpc(ctx: BenchContext) -> AsyncIterator[Measure]:
    async with shared_server(ctx.database_url) as server:
        team = Team(server, "bench post grpc")
        probe = cpu_probe(server.database_url, server.pid)

        async def measure(k: int) -> LoadResult:
            pairs = await team.fresh(k)
            posts = [text_request(p.channel_id, TEXT) for p in pairs]
            metadata = [p.agent.metadata for p in pairs]
            async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                stub = comms_pb2_grpc.CommsServiceStub(channel)

                async def call(i: int) -> None:
                    await stub.PostMessage(posts[i], metadata=metadata[i])

                return await ctx.load(call, k, cpu=probe)

        yield measure


ROW = Row(
    key="post_grpc",
    title="PostMessage over gRPC",
    op="one PostMessage(text block) by an agent into the real server (grpc.aio, 1 shared "
    "channel; compare with the empty gRPC unary row)",
    open=open_post_grpc,
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default=default_database_url(), help="a compass database")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--k", default="1,16", help="comma-separated concurrencies")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    loop_name = resolve_loop(args.loop)
    ctx = BenchContext(args.database_url, args.seconds, args.warmup, loop_name)

    async def go() -> None:
        async with open_post_grpc(ctx) as measure:
            for k in (int(x) for x in args.k.split(",")):
                print(f"post_grpc {(await measure(k)).summary()}", flush=True)

    run_async(go(), loop_name)


if __name__ == "__main__":
    main()
