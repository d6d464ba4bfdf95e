"""The ask lifecycle against a real compass-server, over gRPC and over Connect.

One op: an agent posts a one-question ask (PostMessage), then a person answers
it (RespondToAsk with the minted ask_id). Worker i is pair i: its own agent,
person and channel, new for every measurement, all in one workspace per row
(so the writes of the K workers share that workspace's event log, as one
team's would; `lifecycle_workspaces=per_pair` gives each pair its own).
Besides the lifecycle, each op's two calls are timed on their own (`Phases`).

* `lifecycle_grpc`: grpc.aio, one channel shared by the K workers.
* `lifecycle_connect`: the generated `CommsServiceClient` (Connect protocol,
  binary codec, its default gzip both ways) on one pyqwest transport whose
  pool keeps an idle connection per worker: HTTP/1.1, one connection per
  in-flight call, reused. pyqwest's default keeps only 2 idle connections per
  host; at this load it did not churn (bench/RESULTS.md), but nothing holds
  that under burstier load. Knobs: `connect_http=2` (h2c, one connection),
  `connect_compression=identity`.

The server is `compass-server serve` in its own process (shared by the
server rows of a run, see bench/server.py). Standalone:

    python -m bench.server_lifecycle --database-url URL [--k 1,16] [--seconds 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from pyqwest import Client, HTTPTransport, HTTPVersion

from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Phases,
    Row,
    default_database_url,
    resolve_loop,
    run_async,
)
from bench.server import (
    Team,
    answer_request,
    ask_request,
    cpu_probe,
    shared_server,
)
from compass.v1 import comms_connect, comms_pb2_grpc

POST, ANSWER = "PostMessage", "RespondToAsk"


@asynccontextmanager
async def open_lifecycle_grpc(ctx: BenchContext) -> AsyncIterator[Measure]:
    async with shared_server(ctx.database_url) as server:
        spread = ctx.extra.get("lifecycle_workspaces", "shared") == "per_pair"
        team = Team(server, "bench lifecycle grpc", per_pair_workspaces=spread)
        probe = cpu_probe(server.database_url, server.pid)

        async def measure(k: int) -> LoadResult:
            pairs = await team.fresh(k)
            posts = [ask_request(p.channel_id) for p in pairs]
            async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                stub = comms_pb2_grpc.CommsServiceStub(channel)
                clock = time.perf_counter

                async def call(i: int) -> Phases:
                    pair = pairs[i]
                    t0 = clock()
                    posted = await stub.PostMessage(posts[i], metadata=pair.agent.metadata)
                    t1 = clock()
                    await stub.RespondToAsk(answer_request(posted), metadata=pair.human.metadata)
                    return Phases({POST: t1 - t0, ANSWER: clock() - t1})

                return await ctx.load(call, k, cpu=probe)

        yield measure


def connect_transport(ctx: BenchContext, k: int) -> HTTPTransport:
    """A pyqwest transport sized for K callers.

    Knob `connect_http`: "1.1" (default: what a Connect client speaks to an
    http:// URL; the pool keeps an idle connection per worker, so K callers
    hold K connections) or "2" (h2c with prior knowledge: one connection).
    """
    gzip = ctx.extra.get("connect_compression", "gzip") != "identity"
    if ctx.extra.get("connect_http", "1.1") == "2":
        return HTTPTransport(http_version=HTTPVersion.HTTP2, enable_gzip=gzip)
    return HTTPTransport(pool_max_idle_per_host=max(k, 2), enable_gzip=gzip)


def connect_client(
    ctx: BenchContext, transport: HTTPTransport, address: str
) -> comms_connect.CommsServiceClient:
    """The generated client. Knob `connect_compression`: "gzip" (default, the
    generated client's: requests and responses gzipped) or "identity"."""
    if ctx.extra.get("connect_compression", "gzip") == "identity":
        return comms_connect.CommsServiceClient(
            address, http_client=Client(transport), accept_compression=[], send_compression=None
        )
    return comms_connect.CommsServiceClient(address, http_client=Client(transport))


@asynccontextmanager
async def open_lifecycle_connect(ctx: BenchContext) -> AsyncIterator[Measure]:
    async with shared_server(ctx.database_url) as server:
        spread = ctx.extra.get("lifecycle_workspaces", "shared") == "per_pair"
        team = Team(server, "bench lifecycle connect", per_pair_workspaces=spread)
        probe = cpu_probe(server.database_url, server.pid)

        async def measure(k: int) -> LoadResult:
            pairs = await team.fresh(k)
            posts = [ask_request(p.channel_id) for p in pairs]
            async with (
                connect_transport(ctx, k) as transport,
                connect_client(ctx, transport, server.http_url) as client,
            ):
                clock = time.perf_counter

                async def call(i: int) -> Phases:
                    pair = pairs[i]
                    t0 = clock()
                    posted = await client.post_message(posts[i], headers=pair.agent.headers)
                    t1 = clock()
                    await client.respond_to_ask(answer_request(posted), headers=pair.human.headers)
                    return Phases({POST: t1 - t0, ANSWER: clock() - t1})

                return await ctx.load(call, k, cpu=probe)

        yield measure


ROW = Row(
    key="lifecycle_grpc",
    title="server lifecycle over gRPC",
    op="lifecycle: PostMessage(one-question ask) by an agent, then RespondToAsk by a person "
    "(grpc.aio, 1 shared channel; a pair and channel per worker, one workspace)",
    open=open_lifecycle_grpc,
)

CONNECT_ROW = Row(
    key="lifecycle_connect",
    title="server lifecycle over Connect",
    op="the same lifecycle through the generated CommsServiceClient (Connect, binary codec, "
    "default gzip; HTTP/1.1, pyqwest pool keeping K idle connections)",
    open=open_lifecycle_connect,
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default=default_database_url(), help="a compass database")
    p.add_argument("--rows", default="lifecycle_grpc,lifecycle_connect")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--k", default="1,16", help="comma-separated concurrencies")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    p.add_argument("--connect-http", choices=("1.1", "2"), default="1.1")
    p.add_argument("--connect-compression", choices=("gzip", "identity"), default="gzip")
    p.add_argument("--workspaces", choices=("shared", "per_pair"), default="shared")
    args = p.parse_args(argv)
    loop_name = resolve_loop(args.loop)
    extra = {
        "connect_http": args.connect_http,
        "connect_compression": args.connect_compression,
        "lifecycle_workspaces": args.workspaces,
    }
    ctx = BenchContext(args.database_url, args.seconds, args.warmup, loop_name, extra)
    rows = [r for r in (ROW, CONNECT_ROW) if r.key in args.rows.split(",")]

    async def go() -> None:
        for row in rows:
            assert row.open is not None
            async with row.open(ctx) as measure:
                for k in (int(x) for x in args.k.split(",")):
                    print(f"{row.key} {(await measure(k)).summary()}", flush=True)

    run_async(go(), loop_name)


if __name__ == "__main__":
    main()
