"""Webhooks: how fast a server delivers, how long from a change's commit to
its delivery, and what sending them costs the write path.

    python -m bench.webhooks [--database-url ADMIN_URL] [--seconds 10] [--rounds 2]
                             [--drain 2000] [--parts drain,latency,write]

Its own throwaway database (`compass_bench_webhooks`, dropped at the end), a
real `compass-server serve` per phase, and a receiver on loopback
(tests/receiver.py: HTTP/1.1 over h11, answers 200 at once): in this process
for parts 1 and 2, in a process of its own for part 3, so that its work
doesn't slow the load generator sharing its event loop.

1. Deliveries per second: N asks are committed while no server runs, then a
   server with a webhook key starts and drains them to 1 and to 10 endpoints;
   the rate is counted from the first arrival to the last, and the CPU each
   delivery cost the server, PostgreSQL (this database's backends) and the
   receiver (this process) over the same span.
2. Commit → delivery: asks posted over gRPC at a steady 20 a second; each
   delivery's arrival minus the moment its PostMessage returned, at 1 and 10
   endpoints.
3. The write path: the ask lifecycle (an agent posts a one-question ask over
   gRPC, a person answers it), K = 1 and 16 closed-loop workers, on a server
   without webhooks, on a server sending every change of the lifecycle's
   workspace to 1 endpoint, and on a server with its courier off while a
   second server, serving no clients, sends them; alternating, `--rounds`
   times, pooled; with the machine's idle CPU over the part (/proc/stat).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence

import grpc
import psycopg

from bench.harness import LoadResult, percentile_ms, run_load
from bench.server import (
    Account,
    Provisioner,
    answer_request,
    ask_request,
    create_channel,
    postgres_cpu_s,
    process_cpu_s,
    server_process,
)
from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2_grpc
from compass_server.api.admin import AdminApi
from compass_server.store.types import Operator
from compass_server.store.vault import Vault, new_key, parse_key
from compass_server.store.webhooks import WebhookStore
from compass_server.webhooks.destination import Reach, networks
from tests.receiver import Received, Receiver, Reply

DATABASE = "compass_bench_webhooks"
KEY = new_key()
ON = {"COMPASS_WEBHOOK_KEY": KEY, "COMPASS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
OFF = {"COMPASS_WEBHOOK_KEY": "", "COMPASS_WEBHOOK_KEY_FILE": ""}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Arrivals:
    """When each (type, ask id) arrived, per endpoint path."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, str], list[float]] = collections.defaultdict(list)

    def __call__(self, r: Received) -> Reply:
        payload = json.loads(r.body)
        self.at[(payload["type"], payload["data"]["ask"]["ask_id"])].append(r.at)
        return Reply()

    def count(self, kind: str) -> int:
        return sum(len(v) for (t, _), v in self.at.items() if t == kind)


async def workspace(prov: Provisioner, name: str) -> tuple[uuid.UUID, Account, Account]:
    ws = await prov.workspace(name)
    human = await prov.human(ws, "ada")
    agent = await prov.agent(ws, "scout", human)
    return ws, human, agent


async def channel_of(grpc_target: str, agent: Account, human: Account) -> str:
    async with grpc.aio.insecure_channel(grpc_target) as ch:
        return await create_channel(comms_pb2_grpc.CommsServiceStub(ch), agent, "general", [human])


async def endpoints(prov: Provisioner, ws: uuid.UUID, url: str, n: int) -> None:
    store = prov.store
    api = AdminApi(
        store.admin,
        webhooks=WebhookStore(store.db, store.admin, Vault(parse_key(KEY, "key"))),
        reach=Reach(networks("127.0.0.0/8")),
    )
    for i in range(n):
        await api.create_webhook(Operator(ws), ad.CreateWebhookRequest(url=f"{url}/{i}"))


async def drain(url: str, receiver: Receiver, n_endpoints: int, n: int) -> str:
    async with Provisioner(url) as prov:
        ws, human, agent = await workspace(prov, f"drain {n_endpoints}")
        async with server_process(url, OFF) as off:
            channel = await channel_of(off.grpc_target, agent, human)
        await endpoints(prov, ws, receiver.url(), n_endpoints)
    before = len(receiver.received)
    # Committed while no server runs: the server starts with a backlog.
    async with server_process(url, OFF) as off, grpc.aio.insecure_channel(off.grpc_target) as ch:
        stub = comms_pb2_grpc.CommsServiceStub(ch)
        for _ in range(n):
            await stub.PostMessage(ask_request(channel), metadata=agent.metadata)
    want = before + n * n_endpoints
    async with server_process(url, ON) as on:
        await receiver.wait_for(before + 1, wait=60)
        cpu = process_cpu_s(on.pid), postgres_cpu_s([DATABASE]), time.process_time()
        await receiver.wait_for(want, wait=600)
        spent = (
            process_cpu_s(on.pid) - cpu[0],
            postgres_cpu_s([DATABASE]) - cpu[1],
            time.process_time() - cpu[2],
        )
    got = receiver.received[before:want]
    span = got[-1].at - got[0].at
    rate = (len(got) - 1) / span
    per = [f"{s / (len(got) - 1) * 1e6:,.0f} µs" for s in spent]
    return (
        f"| {n_endpoints} | {n} asks → {len(got)} deliveries | {span:.2f} s | {rate:,.0f}/s "
        f"| {per[0]} | {per[1]} | {per[2]} |"
    )


async def latency(
    url: str, receiver: Receiver, arrivals: Arrivals, n_endpoints: int, seconds: float
) -> str:
    async with Provisioner(url) as prov:
        ws, human, agent = await workspace(prov, f"latency {n_endpoints}")
        await endpoints(prov, ws, receiver.url(), n_endpoints)
    committed: dict[str, float] = {}
    async with server_process(url, ON) as on:
        channel = await channel_of(on.grpc_target, agent, human)
        async with grpc.aio.insecure_channel(on.grpc_target) as ch:
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                tick = time.monotonic()
                posted = await stub.PostMessage(ask_request(channel), metadata=agent.metadata)
                committed[posted.message.blocks[0].ask.ask_id] = time.monotonic()
                await asyncio.sleep(max(0.0, 0.05 - (time.monotonic() - tick)))
        want = len(committed) * n_endpoints
        for _ in range(400):
            if sum(len(arrivals.at.get(("ask.posted", a), [])) for a in committed) >= want:
                break
            await asyncio.sleep(0.05)
    lat = sorted(
        at - committed[a] for a in committed for at in arrivals.at.get(("ask.posted", a), [])
    )
    return (
        f"| {n_endpoints} | {len(committed)} asks, {len(lat)} deliveries | "
        f"{percentile_ms(lat, 50):.1f} ms | {percentile_ms(lat, 99):.1f} ms | "
        f"{lat[-1] * 1000:.1f} ms |"
    )


async def lifecycle(
    url: str,
    settings: dict[str, str],
    name: str,
    receiver_url: str | None,
    k: int,
    seconds: float,
    courier: dict[str, str] | None = None,
) -> LoadResult:
    """`courier`: the settings of a second server, serving no clients, that
    sends the deliveries (the served one then has its courier off)."""
    async with Provisioner(url) as prov:
        pairs = []
        ws = await prov.workspace(name)
        for i in range(k):
            human = await prov.human(ws, f"person-{i}")
            pairs.append((await prov.agent(ws, f"agent-{i}", human), human))
        if receiver_url is not None:
            await endpoints(prov, ws, receiver_url, 1)
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(server_process(url, settings))
        if courier is not None:
            await stack.enter_async_context(server_process(url, courier))
        async with grpc.aio.insecure_channel(server.grpc_target) as ch:
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channels = [
                await create_channel(stub, a, f"desk-{i}", [h]) for i, (a, h) in enumerate(pairs)
            ]

            async def call(i: int) -> None:
                agent, human = pairs[i]
                posted = await stub.PostMessage(ask_request(channels[i]), metadata=agent.metadata)
                await stub.RespondToAsk(answer_request(posted), metadata=human.metadata)

            return await run_load(call, concurrency=k, seconds=seconds, warmup=1.0)


def pooled(results: Sequence[LoadResult]) -> tuple[float, float, float]:
    merged = LoadResult.merge(results)
    return merged.calls_per_s, merged.p50_ms, merged.p99_ms


async def main(args: argparse.Namespace) -> None:
    admin = args.database_url
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{DATABASE}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=DATABASE)
    arrivals = Arrivals()
    receiver = await Receiver(arrivals).start()
    try:
        if "drain" in args.parts:
            print("### Deliveries per second (a backlog drained)\n")
            print(
                "| endpoints | made | first → last arrival | deliveries/s | server CPU "
                "| PostgreSQL CPU | receiver CPU |\n| --- | --- | --- | --- | --- | --- | --- |"
            )
            for n_endpoints, n in ((1, args.drain), (10, args.drain // 5)):
                row = await drain(url, receiver, n_endpoints, n)
                log(row)
                print(row)
        if "latency" in args.parts:
            print("\n### Commit → delivery (20 asks a second)\n")
            print("| endpoints | sent | p50 | p99 | max |\n| --- | --- | --- | --- | --- |")
            for n_endpoints in (1, 10):
                row = await latency(url, receiver, arrivals, n_endpoints, args.seconds)
                log(row)
                print(row)
        if "write" in args.parts:
            await write_path(url, args)
        print(
            f"\nreceiver: {len(receiver.received)} requests on {receiver.connections} connections"
        )
    finally:
        await receiver.close()
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'.encode())


@contextlib.asynccontextmanager
async def receiver_process() -> AsyncIterator[str]:
    """A receiver in a process of its own, so its work doesn't share the
    load generator's event loop; yields its URL."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.webhooks", "receive", stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        yield (await proc.stdout.readline()).decode().strip()
    finally:
        proc.terminate()
        await proc.wait()


async def receive() -> None:
    receiver = await Receiver().start()
    print(receiver.url(), flush=True)
    await asyncio.Event().wait()


def cpu_idle() -> tuple[int, int]:
    """The machine's idle and total CPU ticks so far (/proc/stat)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return ticks[3] + ticks[4], sum(ticks)


async def write_path(url: str, args: argparse.Namespace) -> None:
    print("\n### The ask lifecycle's write path, webhooks off and on\n")
    print(
        "| K | off: lifecycles/s, p50, p99 | on (1 endpoint): lifecycles/s, p50, p99 | on / off "
        "| on, sent by a second process: lifecycles/s, p50, p99 | that / off | machine idle |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    # The served server has no courier; another process, serving no one, sends.
    served = {**ON, "COMPASS_WEBHOOK_COURIER": "false"}
    for k in (1, 16):
        off: list[LoadResult] = []
        on: list[LoadResult] = []
        apart: list[LoadResult] = []
        idle = cpu_idle()
        for r in range(args.rounds):
            off.append(await lifecycle(url, OFF, f"off {k} {r}", None, k, args.seconds))
            async with receiver_process() as receiver_url:
                on.append(await lifecycle(url, ON, f"on {k} {r}", receiver_url, k, args.seconds))
            async with receiver_process() as receiver_url:
                apart.append(
                    await lifecycle(
                        url, served, f"apart {k} {r}", receiver_url, k, args.seconds, ON
                    )
                )
            log(
                f"K={k} round {r}: off {off[-1].summary()} / on {on[-1].summary()}"
                f" / apart {apart[-1].summary()}"
            )
        now = cpu_idle()
        idle_share = (now[0] - idle[0]) / max(1, now[1] - idle[1])
        a, b, c = pooled(off), pooled(on), pooled(apart)
        row = (
            f"| {k} | {a[0]:,.0f}/s, {a[1]:.1f} ms, {a[2]:.1f} ms "
            f"| {b[0]:,.0f}/s, {b[1]:.1f} ms, {b[2]:.1f} ms | {b[0] / a[0]:.2f} "
            f"| {c[0]:,.0f}/s, {c[1]:.1f} ms, {c[2]:.1f} ms | {c[0] / a[0]:.2f} "
            f"| {idle_share:.0%} |"
        )
        log(row)
        print(row)


def cli() -> None:
    if sys.argv[1:] == ["receive"]:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(receive())
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--drain", type=int, default=2000, help="asks of the drain to one endpoint")
    p.add_argument("--parts", default="drain,latency,write")
    asyncio.run(main(p.parse_args()))


if __name__ == "__main__":
    cli()
