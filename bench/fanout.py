"""Fan-out: one posted message delivered to every subscriber's Subscribe stream.

N people (100 or 1000) each hold a gRPC `Subscribe` stream on a real
compass-server; they and an agent share one channel in a workspace of their
own. The agent posts a text message (PostMessage over gRPC), waits until
every subscriber has it, and posts the next: one post in flight at a time.

Latency of a (subscriber, post) pair = the subscriber's receipt time minus the
moment the poster's PostMessage call returned (the post committed just before
the server answered). Both are CLOCK_MONOTONIC readings on the same machine
(`time.monotonic`), so they compare across processes. A receipt before the
return (possible: the commit precedes the response) counts as 0.

The subscribers live in `procs` client processes (`python -m bench.fanout
subscribe`), STREAMS_PER_PROCESS each by default, because one Python process
can't read 1,000 streams fast enough: its own event loop would be the
bottleneck and its queueing would show up as delivery latency. Each
subscriber has its own gRPC connection, as separate people would.

One op of the row is one delivery, so ops/s is deliveries per second; the
per-call table has the PostMessage latency and, per post, the last delivery.
Knobs (`bench.run --set key=value`): `fanout_streams_per_process`,
`fanout_streams_per_connection`.

Standalone:

    python -m bench.fanout --database-url URL [--n 100,1000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc

from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Phases,
    Row,
    RowOpener,
    default_database_url,
    resolve_loop,
    run_async,
)
from bench.server import (
    REPO_ROOT,
    Account,
    Provisioner,
    bearer,
    cpu_probe,
    create_channel,
    shared_server,
    text_request,
)
from compass.v1 import comms_pb2, comms_pb2_grpc

STREAMS_PER_PROCESS = 250
STREAMS_PER_CONNECTION = 1
DELIVERY_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 180.0
FLUSH_EVERY_S = 0.005
POST, LAST = "PostMessage", "last delivery"

now = time.monotonic  # CLOCK_MONOTONIC: comparable across processes


# --------------------------------------------------------------------------- subscriber process


async def subscribe_main(target: str, tokens: list[str], per_connection: int) -> None:
    """Hold one Subscribe stream per token; print `READY n` once every stream
    has its ready frame, then `{"m": message_id, "t": [receipt, …]}` lines for
    message_posted events, batched every few ms. Ends when stdin closes."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def watch_stdin() -> None:
        try:
            sys.stdin.buffer.read()
        finally:
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()

    channels = [
        grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(math.ceil(len(tokens) / per_connection))
    ]
    received: dict[str, list[float]] = {}
    ready = [0]
    all_ready = asyncio.Event()

    async def stream(stub: comms_pb2_grpc.CommsServiceStub, token: str) -> None:
        call = stub.Subscribe(comms_pb2.SubscribeRequest(), metadata=bearer(token))
        async for event in call:
            t = now()
            kind = event.WhichOneof("kind")
            if kind == "message_posted":
                received.setdefault(event.message_posted.message.message_id, []).append(t)
            elif kind == "ready":
                ready[0] += 1
                if ready[0] == len(tokens):
                    all_ready.set()

    async def flush() -> None:
        nonlocal received
        await all_ready.wait()
        print(f"READY {len(tokens)}", flush=True)
        while True:
            await asyncio.sleep(FLUSH_EVERY_S)
            if received:
                batch, received = received, {}
                lines = (json.dumps({"m": m, "t": ts}) for m, ts in batch.items())
                sys.stdout.write("\n".join(lines) + "\n")
                sys.stdout.flush()

    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(
                    stream(comms_pb2_grpc.CommsServiceStub(channels[i // per_connection]), tok)
                )
                for i, tok in enumerate(tokens)
            ]
            tasks.append(tg.create_task(flush()))
            await stop.wait()
            for task in tasks:
                task.cancel()
    except* grpc.aio.AioRpcError as group:
        err = group.exceptions[0]
        assert isinstance(err, grpc.aio.AioRpcError)
        print(f"ERROR {err.code().name}: {err.details()}", flush=True)
    finally:
        for channel in channels:
            await channel.close()


# --------------------------------------------------------------------------- the row


@dataclass
class Subscribers:
    """The client processes holding the N streams, and the receipts they report."""

    procs: list[asyncio.subprocess.Process] = field(default_factory=list)
    receipts: dict[str, list[float]] = field(default_factory=dict)
    arrived: dict[str, asyncio.Event] = field(default_factory=dict)
    expected: int = 0
    failed: str = ""

    def waiter(self, message_id: str) -> asyncio.Event:
        return self.arrived.setdefault(message_id, asyncio.Event())

    def take(self, message_id: str, times: Sequence[float]) -> None:
        got = self.receipts.setdefault(message_id, [])
        got.extend(times)
        if len(got) >= self.expected:
            self.waiter(message_id).set()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]


async def _read(
    proc: asyncio.subprocess.Process, subs: Subscribers, ready: asyncio.Queue[int]
) -> None:
    assert proc.stdout is not None
    async for raw in proc.stdout:
        line = raw.decode()
        if line.startswith("{"):
            item = json.loads(line)
            subs.take(item["m"], item["t"])
        elif line.startswith("READY"):
            await ready.put(int(line.split()[1]))
        elif line.startswith("ERROR"):
            subs.failed = line.strip()
            await ready.put(-1)
    if not subs.failed:
        subs.failed = f"subscriber process {proc.pid} ended"
    for event in subs.arrived.values():
        event.set()


@asynccontextmanager
async def subscriber_processes(
    target: str, tokens: Sequence[str], per_process: int, per_connection: int
) -> AsyncIterator[Subscribers]:
    subs = Subscribers(expected=len(tokens))
    ready: asyncio.Queue[int] = asyncio.Queue()
    chunks = [list(tokens[i : i + per_process]) for i in range(0, len(tokens), per_process)]
    readers: list[asyncio.Task[None]] = []
    try:
        for chunk in chunks:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.fanout",
                "subscribe",
                "--target",
                target,
                "--per-connection",
                str(per_connection),
                cwd=REPO_ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(chunk).encode() + b"\n")
            await proc.stdin.drain()
            subs.procs.append(proc)
            readers.append(asyncio.create_task(_read(proc, subs, ready)))
        held = 0
        deadline = time.monotonic() + READY_TIMEOUT_S
        for _ in chunks:
            n = await asyncio.wait_for(ready.get(), max(0.1, deadline - time.monotonic()))
            if n < 0:
                raise RuntimeError(f"a subscriber failed: {subs.failed}")
            held += n
        print(
            f"  [fan-out: {held} Subscribe streams ready in {len(chunks)} client process(es), "
            f"{per_connection} stream(s) per connection]",
            file=sys.stderr,
            flush=True,
        )
        yield subs
    finally:
        for proc in subs.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in subs.procs:
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for task in readers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def open_fanout(n: int) -> RowOpener:
    @asynccontextmanager
    async def open_row(ctx: BenchContext) -> AsyncIterator[Measure]:
        per_process = int(ctx.extra.get("fanout_streams_per_process", STREAMS_PER_PROCESS))
        per_connection = int(ctx.extra.get("fanout_streams_per_connection", STREAMS_PER_CONNECTION))
        async with shared_server(ctx.database_url) as server:
            async with Provisioner(ctx.database_url) as prov:
                ws = await prov.workspace(f"bench fanout {n}")
                people = [await prov.human(ws, f"watcher-{i}") for i in range(n)]
                poster: Account = await prov.agent(ws, "announcer", people[0])
            async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                stub = comms_pb2_grpc.CommsServiceStub(channel)
                channel_id = await create_channel(stub, poster, f"all-hands-{n}", people)
            seq = [0]

            async def measure(k: int) -> LoadResult:
                if k != 1:
                    raise ValueError("fan-out posts one message at a time (K=1)")
                async with (
                    subscriber_processes(
                        server.grpc_target, [p.token for p in people], per_process, per_connection
                    ) as subs,
                    grpc.aio.insecure_channel(server.grpc_target) as channel,
                ):
                    stub = comms_pb2_grpc.CommsServiceStub(channel)
                    probe = cpu_probe(ctx.database_url, server.pid, subscribers=subs.pids)
                    done: list[tuple[float, list[float]]] = []  # (perf_counter, latencies)
                    missing = [0]

                    async def call(i: int) -> Phases:
                        seq[0] += 1
                        req = text_request(channel_id, f"release {seq[0]} is out")
                        t0 = now()
                        posted = await stub.PostMessage(req, metadata=poster.metadata)
                        t1 = now()
                        message_id = posted.message.message_id
                        arrived = subs.waiter(message_id)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(arrived.wait(), DELIVERY_TIMEOUT_S)
                        if subs.failed:
                            raise RuntimeError(subs.failed)
                        times = subs.receipts.pop(message_id, [])
                        subs.arrived.pop(message_id, None)
                        lat = [max(0.0, t - t1) for t in times]
                        done.append((time.perf_counter(), lat))
                        missing[0] += n - len(lat)
                        return Phases({POST: t1 - t0, LAST: max(lat, default=math.nan)})

                    posts = await ctx.load(call, 1, cpu=probe)
                    assert posts.window is not None
                    start, until = posts.window
                    kept = [lat for t, lat in done if start <= t <= until]
                    latencies = tuple(sorted(x for lat in kept for x in lat))
                    short = sum(n - len(lat) for lat in kept)
                    print(
                        f"  [fan-out to {n}: {len(kept)} posts in the window, "
                        f"{short} deliveries missing in it, {missing[0]} over the run]",
                        file=sys.stderr,
                        flush=True,
                    )
                    return dataclasses.replace(posts, latencies_s=latencies, errors=short)

            yield measure

    return open_row


def row(n: int) -> Row:
    return Row(
        key=f"fanout_{n}",
        title=f"fan-out to {n} subscribers",
        op=f"one delivery: a PostMessage(text) by an agent reaching one of {n} people's "
        "Subscribe streams (gRPC), one post at a time; latency from the post's return "
        "to receipt (CLOCK_MONOTONIC); ops/s = deliveries/s",
        open=open_fanout(n),
        ks=(1,),
        vs_ceiling=False,
    )


ROW_100 = row(100)
ROW_1000 = row(1000)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", nargs="?", choices=("measure", "subscribe"), default="measure")
    p.add_argument("--database-url", default=default_database_url(), help="a compass database")
    p.add_argument("--target", help="subscribe: the server's gRPC host:port")
    p.add_argument("--per-connection", type=int, default=STREAMS_PER_CONNECTION)
    p.add_argument("--per-process", type=int, default=STREAMS_PER_PROCESS)
    p.add_argument("--n", default="100,1000", help="subscriber counts")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    loop_name = resolve_loop(args.loop)

    if args.mode == "subscribe":
        tokens = json.loads(sys.stdin.buffer.readline())
        run_async(subscribe_main(args.target, tokens, args.per_connection), loop_name)
        return

    extra = {
        "fanout_streams_per_process": str(args.per_process),
        "fanout_streams_per_connection": str(args.per_connection),
    }
    ctx = BenchContext(args.database_url, args.seconds, args.warmup, loop_name, extra)

    async def go() -> None:
        for n in (int(x) for x in args.n.split(",")):
            opener = open_fanout(n)
            async with opener(ctx) as measure:
                print(f"fanout_{n} {(await measure(1)).summary()}", flush=True)

    run_async(go(), loop_name)


if __name__ == "__main__":
    main()
